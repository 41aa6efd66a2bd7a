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
	b := Local()
	tu.Steady(b)
	if p, l := settings(); p < b.MinPercent || p > b.MaxPercent || l != math.MaxInt64 {
		t.Errorf("steady: GC %d, limit %d; want %d–%d, none", p, l, b.MinPercent, b.MaxPercent)
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
	tu.Steady(Local()) // nil: nothing
	tu.Finishing()
	if p, l := settings(); p != 123 || l != math.MaxInt64 {
		t.Errorf("with GOGC set: GC %d, limit %d; want 123, none", p, l)
	}
	delete(env, "GOGC")
	env["GOMEMLIMIT"] = "1GiB"
	if tu := Start(getenv); tu != nil {
		t.Error("Start took over with GOMEMLIMIT set")
	}
	if p, _ := settings(); p != Local().MinPercent {
		t.Errorf("with GOMEMLIMIT set: GC %d, want %d", p, Local().MinPercent)
	}
}

func TestPercentFor(t *testing.T) {
	l, r := Local(), Remote()
	for _, c := range []struct {
		b    Budget
		live uint64
		want int
	}{
		{l, 0, l.MaxPercent},
		{l, 1 << 20, l.MaxPercent},
		{l, l.Peak / 2, l.MaxPercent},
		{l, l.Peak * 10 / 16, 60},
		{l, l.Peak * 2 / 3, l.MinPercent},
		{l, l.Peak, l.MinPercent},
		{l, 10 * l.Peak, l.MinPercent},
		// A remote link's target is never below Go's default.
		{r, 0, 200},
		{r, 40 << 20, 200},
		{r, 50 << 20, 156},
		{r, 64 << 20, 100},
		{r, 10 * r.Peak, 100},
	} {
		if got := c.b.percentFor(c.live); got != c.want {
			t.Errorf("%+v: percentFor(%d) = %d, want %d", c.b, c.live, got, c.want)
		}
	}
}

// TestSteadyFollowsLiveHeap: in the steady phase each collection sets the
// target for the live heap it found; finishing stops that.
func TestSteadyFollowsLiveHeap(t *testing.T) {
	p0, l0 := settings()
	t.Cleanup(func() { debug.SetGCPercent(p0); debug.SetMemoryLimit(l0) })
	tu := Start(func(string) string { return "" })
	b := Local()
	tu.Steady(b)
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
	if p := settle(b.MaxPercent); p != b.MaxPercent {
		t.Errorf("small live heap: GC %d, want %d", p, b.MaxPercent)
	}
	big := make([]byte, b.Peak*10/16-liveHeap())
	if p := settle(60); p < b.MinPercent || p >= b.MaxPercent {
		t.Errorf("live heap of %d MiB: GC %d, want less than %d", liveHeap()>>20, p, b.MaxPercent)
	}
	runtime.KeepAlive(big)
	if p := settle(b.MaxPercent); p != b.MaxPercent {
		t.Errorf("live heap down again: GC %d, want %d", p, b.MaxPercent)
	}
	tu.Finishing()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if p, l := settings(); p != -1 || l != Limit {
		t.Errorf("finishing, after a collection: GC %d, limit %d; want off under %d", p, l, Limit)
	}
}

// TestFinishingKeepsSteadyGoal: a live heap larger than Limit when the
// backends end does not make the finishing phase collect back to back:
// the collector is off under the goal the steady phase had reached.
func TestFinishingKeepsSteadyGoal(t *testing.T) {
	p0, l0 := settings()
	t.Cleanup(func() { debug.SetGCPercent(p0); debug.SetMemoryLimit(l0) })
	tu := Start(func(string) string { return "" })
	tu.Steady(Remote())
	big := make([]byte, 2*Limit)
	runtime.GC()
	goal := heapGoal()
	if goal <= 2*Limit {
		t.Fatalf("heap goal %d with a live heap over %d", goal, 2*Limit)
	}
	tu.Finishing()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, l := settings()
	if p != -1 || l < goal {
		t.Errorf("finishing: GC %d, limit %d; want off under the steady goal %d", p, l, goal)
	}
	// Allocating a little more does not collect.
	for i := 0; i < 100; i++ {
		sink = make([]byte, 64<<10)
	}
	runtime.ReadMemStats(&after)
	if after.NumGC != before.NumGC {
		t.Errorf("%d collections while finishing", after.NumGC-before.NumGC)
	}
	runtime.KeepAlive(big)
}

var sink []byte
