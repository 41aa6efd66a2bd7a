package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// settings returns the collector's target and limit, leaving them as they
// were.
func settings() (percent int, limit int64) {
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1) // -1 reads it
}

func TestPhases(t *testing.T) {
	p0, l0 := settings()
	t.Cleanup(func() { debug.SetGCPercent(p0); debug.SetMemoryLimit(l0) })
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	tu := Start(getenv)
	if tu == nil {
		t.Fatal("Start returned nil without GOGC or GOMEMLIMIT")
	}
	if p, l := settings(); p != -1 || l != Limit {
		t.Errorf("starting: GC %d, limit %d; want off under %d", p, l, Limit)
	}
	tu.Steady()
	if p, l := settings(); p < MinPercent || p > MaxPercent || l != math.MaxInt64 {
		t.Errorf("steady: GC %d, limit %d; want %d–%d, none", p, l, MinPercent, MaxPercent)
	}
	tu.Finishing()
	if p, l := settings(); p != -1 || l != Limit {
		t.Errorf("finishing: GC %d, limit %d; want off under %d", p, l, Limit)
	}

	// The user's settings stand.
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(math.MaxInt64)
	env["GOGC"] = "123"
	if tu := Start(getenv); tu != nil {
		t.Error("Start took over with GOGC set")
	}
	tu = nil
	tu.Steady() // nil: nothing
	tu.Finishing()
	if p, l := settings(); p != 123 || l != math.MaxInt64 {
		t.Errorf("with GOGC set: GC %d, limit %d; want 123, none", p, l)
	}
	delete(env, "GOGC")
	env["GOMEMLIMIT"] = "1GiB"
	if tu := Start(getenv); tu != nil {
		t.Error("Start took over with GOMEMLIMIT set")
	}
	if p, _ := settings(); p != MinPercent {
		t.Errorf("with GOMEMLIMIT set: GC %d, want %d", p, MinPercent)
	}
}

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, MaxPercent},
		{1 << 20, MaxPercent},
		{Peak / 2, MaxPercent},
		{Peak * 10 / 16, 60},
		{Peak * 2 / 3, MinPercent},
		{Peak, MinPercent},
		{10 * Peak, MinPercent},
	} {
		if got := percentFor(c.live); got != c.want {
			t.Errorf("percentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestSteadyFollowsLiveHeap: in the steady phase each collection sets the
// target for the live heap it found; finishing stops that.
func TestSteadyFollowsLiveHeap(t *testing.T) {
	p0, l0 := settings()
	t.Cleanup(func() { debug.SetGCPercent(p0); debug.SetMemoryLimit(l0) })
	tu := Start(func(string) string { return "" })
	tu.Steady()
	// settle runs collections until the finalizer has set the target
	// (it runs on its own goroutine after the collection).
	settle := func(want int) int {
		p := 0
		for i := 0; i < 50; i++ {
			runtime.GC()
			time.Sleep(2 * time.Millisecond)
			if p, _ = settings(); p == want {
				break
			}
		}
		return p
	}
	if p := settle(MaxPercent); p != MaxPercent {
		t.Errorf("small live heap: GC %d, want %d", p, MaxPercent)
	}
	big := make([]byte, Peak*10/16-int(liveHeap()))
	if p := settle(60); p < MinPercent || p >= MaxPercent {
		t.Errorf("live heap of %d MiB: GC %d, want less than %d", liveHeap()>>20, p, MaxPercent)
	}
	runtime.KeepAlive(big)
	if p := settle(MaxPercent); p != MaxPercent {
		t.Errorf("live heap down again: GC %d, want %d", p, MaxPercent)
	}
	tu.Finishing()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p, l := settings(); p != -1 || l != Limit {
		t.Errorf("finishing, after a collection: GC %d, limit %d; want off under %d", p, l, Limit)
	}
}
