package remote

import (
	"sync"
	"time"
)

// measuredMin is the smallest transfer (bytes on the wire) a throughput
// measures: a smaller one's time is its round trip and the server's
// handling, not the link's bandwidth.
const measuredMin = 256 << 10

// enoughMeasured is how many bytes a direction must have measured before
// its throughput is taken for the link's: a few large blobs.
const enoughMeasured = 8 << 20

// throughput measures the bytes per second one direction of the link
// carries: the wire bytes of the CAS transfers of at least measuredMin
// over the time at least one of them was under way (a busy period), each
// busy period less a round trip, the latency in it that carries no bytes
// (but never less than a quarter of it: the round trip Dial measured is an
// upper estimate). Transfers that overlap share the link and count their
// time once, so a saturated link measures its bandwidth, not a
// transfer's share of it; one transfer alone on a fast link measures
// its bytes over its time less its latency, not its round trip. Safe for
// concurrent use.
type throughput struct {
	rtt time.Duration
	now func() time.Time

	mu     sync.Mutex
	active int       // transfers under way
	start  time.Time // the busy period's
	last   time.Time // the busy period's last end, zero before its first
	bytes  int64
	busy   time.Duration
}

func newThroughput(rtt time.Duration, now func() time.Time) *throughput {
	return &throughput{rtt: rtt, now: now}
}

// begin starts measuring a transfer of about size bytes; end, called
// once it is over, counts the wire bytes it moved (ok) or only ends it
// (failed: its time is not the link's). A transfer under measuredMin is
// not measured.
func (t *throughput) begin(size int64) (end func(wire int64, ok bool)) {
	if t == nil || size < measuredMin {
		return func(int64, bool) {}
	}
	t.mu.Lock()
	if t.active == 0 {
		t.start, t.last = t.now(), time.Time{}
	}
	t.active++
	t.mu.Unlock()
	return func(wire int64, ok bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		now := t.now()
		if ok {
			if t.last.IsZero() {
				period := now.Sub(t.start)
				t.busy += max(period-t.rtt, period/4)
			} else {
				t.busy += now.Sub(t.last)
			}
			t.last = now
			t.bytes += wire
		}
		t.active--
	}
}

// Rate is a measured throughput: Bytes over their busy time.
type Rate struct {
	// BytesPerSec is the throughput, 0 if unknown.
	BytesPerSec float64 `json:"bytes_per_sec"`
	// Bytes is how many bytes it was measured on.
	Bytes int64 `json:"bytes"`
}

// known reports whether r was measured on enough bytes to be the link's.
func (r Rate) known() bool { return r.BytesPerSec > 0 && r.Bytes >= enoughMeasured }

// rate is what t has measured so far.
func (t *throughput) rate() Rate {
	if t == nil {
		return Rate{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Rate{Bytes: t.bytes}
	if t.busy > 0 {
		r.BytesPerSec = float64(t.bytes) / t.busy.Seconds()
	}
	return r
}
