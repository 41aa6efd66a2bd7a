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
// over the shorter of two times, each less the latency that carries no
// bytes (a round trip, but never more than three quarters of the time it
// is taken from: the round trip Dial measured is an upper estimate):
//   - busy: the time at least one of them was under way, less a round
//     trip per busy period. Transfers that overlap share the link and
//     count their time once, so a saturated link measures its bandwidth,
//     not a transfer's share of it;
//   - own: the sum of each transfer's own time, less a round trip each.
//     Transfers that overlap only in their latency (a link far from
//     saturated, whose busy periods are mostly round trips) measure the
//     bandwidth each had, not the link's idle demand.
//
// Safe for concurrent use.

type throughput struct {
	rtt time.Duration
	now func() time.Time

	mu     sync.Mutex
	active int       // transfers under way
	start  time.Time // the busy period's
	last   time.Time // the busy period's last end, zero before its first
	bytes  int64
	busy   time.Duration
	own    time.Duration
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
	began := t.now()
	t.mu.Unlock()
	return func(wire int64, ok bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		now := t.now()
		if ok {
			if t.last.IsZero() {
				t.busy += t.lessLatency(now.Sub(t.start))
			} else {
				t.busy += now.Sub(t.last)
			}
			t.own += t.lessLatency(now.Sub(began))
			t.last = now
			t.bytes += wire
		}
		t.active--
	}
}

// lessLatency is d less a round trip, and at least a quarter of d.
func (t *throughput) lessLatency(d time.Duration) time.Duration { return max(d-t.rtt, d/4) }

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
	if d := min(t.busy, t.own); d > 0 {
		r.BytesPerSec = float64(t.bytes) / d.Seconds()
	}
	return r
}
