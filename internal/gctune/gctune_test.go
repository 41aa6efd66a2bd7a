package gctune

import (
	"math"
	"runtime/debug"
	"testing"
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
	if p, l := settings(); p != Percent || l != math.MaxInt64 {
		t.Errorf("steady: GC %d, limit %d; want %d, none", p, l, Percent)
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
	if p, _ := settings(); p != Percent {
		t.Errorf("with GOMEMLIMIT set: GC %d, want %d", p, Percent)
	}
}
