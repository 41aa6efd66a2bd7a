package remote

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func near(got, want float64) bool { return math.Abs(got-want) <= want*1e-9 }

// TestThroughputSaturated: transfers that overlap share the link, so
// their bytes go over the time the link was busy, counted once, less one
// round trip: the link's bandwidth, not one transfer's share of it.
func TestThroughputSaturated(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	tp := newThroughput(25*time.Millisecond, clk.now)
	const n, size = 4, 4 << 20
	var ends []func(int64, bool)
	for range n {
		ends = append(ends, tp.begin(size))
		clk.advance(10 * time.Millisecond)
	}
	// The first ends 1.03 s after the first began, each other 1 s after
	// the one before: 4 × 4 MiB in 4.03 s busy, less the round trip.
	clk.advance(time.Second - 10*time.Millisecond)
	for _, end := range ends {
		end(size, true)
		clk.advance(time.Second)
	}
	busy := (4030*time.Millisecond - 25*time.Millisecond).Seconds()
	if r := tp.rate(); !near(r.BytesPerSec, n*size/busy) || r.Bytes != n*size {
		t.Errorf("rate %+v, want %.0f B/s over %d bytes", r, n*size/busy, n*size)
	}
}

// TestThroughputIdleLink: transfers one at a time, with the link idle
// between them and each mostly its round trip, measure their bytes over
// their time less the round trip: not the link's demand over the whole
// run, nor the round trip's cost.
func TestThroughputIdleLink(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	tp := newThroughput(25*time.Millisecond, clk.now)
	for range 10 {
		end := tp.begin(1 << 20)
		clk.advance(25*time.Millisecond + 20*time.Millisecond)
		end(1<<20, true)
		clk.advance(time.Second) // idle
	}
	want := float64(10<<20) / (200 * time.Millisecond).Seconds()
	if r := tp.rate(); !near(r.BytesPerSec, want) {
		t.Errorf("rate %.0f B/s, want %.0f", r.BytesPerSec, want)
	}
	if !tp.rate().known() {
		t.Errorf("10 MiB measured is not taken as known")
	}
}

// TestThroughputOverlappingLatency: transfers that overlap only in
// their round trips, on a link far from saturated, measure the bandwidth
// each had (their bytes over their own times less a round trip each),
// not the busy time their staggered round trips span.
func TestThroughputOverlappingLatency(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	tp := newThroughput(25*time.Millisecond, clk.now)
	a := tp.begin(1 << 20)
	clk.advance(30 * time.Millisecond)
	b := tp.begin(1 << 20)
	clk.advance(10 * time.Millisecond)
	a(1<<20, true) // 40 ms: its round trip and 15 ms of bytes
	clk.advance(30 * time.Millisecond)
	b(1<<20, true) // the same, 30 ms later; busy 70 ms less a round trip
	want := float64(2<<20) / (30 * time.Millisecond).Seconds()
	if r := tp.rate(); !near(r.BytesPerSec, want) {
		t.Errorf("rate %.0f B/s, want %.0f (2 MiB in 15 ms each)", r.BytesPerSec, want)
	}
}

// TestThroughputLeavesOut: a transfer too small to time the link, and a
// failed one, count nothing; a period shorter than the round trip counts
// a quarter of itself, never nothing.
func TestThroughputLeavesOut(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	tp := newThroughput(100*time.Millisecond, clk.now)
	end := tp.begin(1000)
	clk.advance(time.Second)
	end(1000, true)
	end = tp.begin(1 << 20)
	clk.advance(time.Second)
	end(1<<20, false)
	if r := tp.rate(); r.Bytes != 0 || r.BytesPerSec != 0 {
		t.Errorf("a tiny and a failed transfer measured %+v", r)
	}
	end = tp.begin(1 << 20)
	clk.advance(40 * time.Millisecond)
	end(1<<20, true)
	if r := tp.rate(); !near(r.BytesPerSec, float64(1<<20)/0.01) {
		t.Errorf("rate %.0f B/s, want %.0f (a quarter of 40 ms)", r.BytesPerSec, float64(1<<20)/0.01)
	}
}

// measuredLink is a link under auto whose throughput up and down this
// link has measured as given (bytes/s, on 16 MiB each), with zstd known.
func measuredLink(t *testing.T, upBps, downBps float64, z *ZstdSpeed) *link {
	t.Helper()
	clk := &fakeClock{t: time.Unix(0, 0)}
	l := newLink(true, 0, clk.now)
	for _, m := range []struct {
		tp  *throughput
		bps float64
	}{{l.up, upBps}, {l.down, downBps}} {
		if m.bps == 0 {
			continue
		}
		end := m.tp.begin(16 << 20)
		clk.advance(time.Duration(float64(16<<20) / m.bps * float64(time.Second)))
		end(16<<20, true)
	}
	if z != nil {
		z.Host = l.host
		l.zstd.Store(z)
	}
	return l
}

// zstdHere: 200 MB/s compressing large blobs and saving 30% (worth it,
// saving twice its time, below 30 MB/s); small blobs compress worse,
// 100 MB/s saving 20% (below 10 MB/s); decompressing 1 GB/s.
func zstdHere() *ZstdSpeed {
	return &ZstdSpeed{
		Small: ZstdClass{Compress: 100e6, Decompress: 1e9, Saved: 0.2},
		Large: ZstdClass{Compress: 200e6, Decompress: 1e9, Saved: 0.3},
	}
}

// TestAutoChoosesPerSizeClass: given the measured throughput and zstd's
// speed here, each direction and size class is compressed exactly when
// compressing is faster than sending, tiny blobs never, and before the
// link or zstd is measured the safe choice is downloads only.
func TestAutoChoosesPerSizeClass(t *testing.T) {
	const tiny, small, large = 4 << 10, 256 << 10, 4 << 20
	for _, tc := range []struct {
		name                      string
		up, down                  float64
		z                         *ZstdSpeed
		tinyUp, smallUp, largeUp  bool
		tinyDown, smallDn, largeD bool
	}{
		{"office uplink 50 Mbit/s", 6.25e6, 6.25e6, zstdHere(), false, true, true, false, true, true},
		{"fast link 1 Gbit/s: small downloads save too little", 125e6, 125e6, zstdHere(), false, false, false, false, false, true},
		{"100 Mbit/s: large blobs only", 12.5e6, 12.5e6, zstdHere(), false, false, true, false, true, true},
		{"saving less than twice its CPU time", 40e6, 40e6, zstdHere(), false, false, false, false, true, true},
		{"10 Gbit/s: downloads too go as they are", 1.25e9, 1.25e9, zstdHere(), false, false, false, false, false, false},
		{"not measured yet", 0, 0, zstdHere(), false, false, false, false, true, true},
		{"zstd not timed yet", 12.5e6, 12.5e6, nil, false, false, false, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := measuredLink(t, tc.up, tc.down, tc.z)
			got := [6]bool{l.compress(up, tiny), l.compress(up, small), l.compress(up, large),
				l.compress(down, tiny), l.compress(down, small), l.compress(down, large)}
			want := [6]bool{tc.tinyUp, tc.smallUp, tc.largeUp, tc.tinyDown, tc.smallDn, tc.largeD}
			if got != want {
				t.Errorf("compressed (up tiny, small, large; down tiny, small, large) = %v, want %v", got, want)
			}
		})
	}
	// An explicit setting: the link says yes, the zstd flags decide.
	var explicit *link
	if !explicit.compress(up, 4<<10) || !newLink(false, 0, time.Now).compress(up, 4<<10) {
		t.Errorf("an explicit setting's link does not leave the choice to the flags")
	}
}

// TestAutoAdaptsWithinTheLink: what an earlier link measured decides
// until this one has measured enough of its own, which then decides.
func TestAutoAdaptsWithinTheLink(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	l := newLink(true, 0, clk.now)
	z := zstdHere()
	z.Host = l.host
	l.recall(Measured{Up: Rate{BytesPerSec: 125e6, Bytes: 100 << 20}, Zstd: z})
	if l.compress(up, 4<<20) {
		t.Fatalf("a fast link recalled: uploads compressed")
	}
	end := l.up.begin(16 << 20)
	clk.advance(time.Second + time.Second/3) // 12.6 MB/s
	end(16<<20, true)
	if !l.compress(up, 4<<20) {
		t.Errorf("this link measured 12.6 MB/s up: uploads not compressed")
	}
	if d := l.describe(); !strings.Contains(d, "uploads of 1 MiB or more compressed, smaller ones not") || !strings.Contains(d, "measured 12.6 MB/s up by this link") ||
		!strings.Contains(d, "zstd compresses 200.0 MB/s here saving 30%") {
		t.Errorf("describe = %q", d)
	}
}

// TestMeasuredIsRemembered: what a link hands on to be remembered is
// each direction it measured enough of, else what it recalled, and the
// zstd speed of this host; a zstd speed recalled from another host is
// not this machine's and is timed again.
func TestMeasuredIsRemembered(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	l := newLink(true, 0, clk.now)
	host, _ := os.Hostname()
	old := Measured{Up: Rate{BytesPerSec: 1e6, Bytes: 50 << 20}, Down: Rate{BytesPerSec: 2e6, Bytes: 50 << 20},
		Zstd: &ZstdSpeed{Host: host + "-elsewhere", Large: ZstdClass{Compress: 1}}}
	l.recall(old)
	if l.zstd.Load() != nil {
		t.Fatalf("another host's zstd speed taken for this one's")
	}
	end := l.down.begin(16 << 20)
	clk.advance(time.Second)
	end(16<<20, true)
	small := l.up.begin(1 << 20) // too few bytes to replace the recalled
	clk.advance(time.Second)
	small(1<<20, true)
	sample := make([]byte, 2<<20)
	for i := range sample {
		sample[i] = byte(i % 7)
	}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	l.sample(enc, dec, sample)
	m := l.measured()
	if m.Up != old.Up {
		t.Errorf("up %+v, want the recalled %+v (1 MiB measured is not enough)", m.Up, old.Up)
	}
	if !near(m.Down.BytesPerSec, 16<<20) || m.Down.Bytes != 16<<20 {
		t.Errorf("down %+v, want this link's 16 MiB/s", m.Down)
	}
	if m.Zstd == nil || m.Zstd.Host != host || m.Zstd.Large.Compress <= 0 || m.Zstd.Large.Saved <= 0.5 || m.Zstd.Small.Compress <= 0 {
		t.Errorf("zstd %+v, want this host's, timed on the sample", m.Zstd)
	}
}
