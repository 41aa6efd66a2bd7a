// Package gctune sets Go's garbage collector for the phases of a run.
//
// thindist's live heap is small and most of what it allocates is garbage
// at once. While it starts (flags, the job file, the connection, the
// history) and while it finishes (the summary, the trace, the record), the
// linker waits for it, and a collection there is pure delay: the runtime's
// minimum heap, scaled down by the low target the backends run at, made
// the start of a 311-job link collect several times, 8 ms of a 33 ms
// start (measured). Those two phases run with the collector off under a
// memory limit, which still bounds the heap. The backends, and thindist's
// other commands, run at a target that follows the live heap (Steady).
package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The GC target while the backends run follows the live heap, between
// MinPercent and MaxPercent: as high as keeps the heap's peak within Peak.
// A remote link's live heap is a few MB and almost all it allocates is
// garbage at once (messages, blobs, contexts): at Go's default of 100 it
// collects half as often as at 50, and thindist's CPU per remote action
// was 8–10 % lower (gen500 on the simulated cluster, W = 64, 25 ms: 1.78–1.84
// ms against 1.93–2.07, three links each). A large link's live heap (the
// actions, the record: 12 MB for 10,000 jobs) would at 100 peak at twice
// that (10,000 no-op jobs: 44.7–46.2 MiB RSS against 37.6–38.8 at 50), so
// there the target comes down, to MinPercent at the least. With Peak at
// 14 MiB those jobs peak as they did at a fixed 50 (38.1–38.7 MiB against
// 38.3–38.5, three runs each; at 16 and 18 MiB: 39.2–40.1 MiB), and a live
// heap up to 7 MiB still collects at 100.
const (
	MinPercent = 50
	MaxPercent = 100
	Peak       = 14 << 20
)

// percentFor is the target for a live heap of live bytes (0: not known
// yet, no collection so far).
func percentFor(live uint64) int {
	if live == 0 {
		return MaxPercent
	}
	if live >= Peak {
		return MinPercent
	}
	return min(MaxPercent, max(MinPercent, int((Peak-live)*100/live)))
}

// Limit bounds the heap while the collector is off: past it, the runtime
// collects anyway. Whatever the heap reaches there stays resident, so the
// start and the end of a large run set its peak memory: at 32 MiB, 10,000
// no-op jobs peaked at 42.5–43.8 MiB RSS, at 24 MiB at 37.7–37.9 (their
// live heap, at most 13 MB, collected a few times more while it starts).
// A link of a few hundred jobs stays far below either.
const Limit = 24 << 20

// Tuner switches the collector between the phases. Its methods do nothing
// on a nil Tuner.
type Tuner struct {
	mu     sync.Mutex
	steady bool // in the steady phase: each collection sets the target
	armed  bool // a sentinel waits for the next collection
}

// Start turns the collector off under Limit for the start of the run and
// returns the Tuner for its phases. If the user set GOGC, it does nothing
// and returns nil; if only GOMEMLIMIT, it sets MinPercent (the user's
// limit, not the tuner, bounds the heap) and returns nil.
func Start(getenv func(string) string) *Tuner {
	switch {
	case getenv("GOGC") != "":
		return nil
	case getenv("GOMEMLIMIT") != "":
		debug.SetGCPercent(MinPercent)
		return nil
	}
	off()
	return &Tuner{}
}

// Steady sets the collector for steady work, the backends or a command
// that is not a link (report, stats, cache): no limit, and a target that
// each collection sets again from the live heap it leaves (percentFor).
func (t *Tuner) Steady() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steady = true
	debug.SetGCPercent(percentFor(liveHeap()))
	debug.SetMemoryLimit(math.MaxInt64)
	if !t.armed {
		t.armed = true
		t.arm()
	}
}

// Finishing turns the collector off again, under Limit, once the backends
// have ended.
func (t *Tuner) Finishing() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steady = false
	off()
}

// arm leaves a sentinel whose finalizer runs after the next collection:
// it sets the target for the live heap that collection found, and arms
// the next, for as long as the phase is steady.
func (t *Tuner) arm() {
	s := new(sentinel)
	runtime.SetFinalizer(s, func(*sentinel) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.steady {
			t.armed = false
			return
		}
		debug.SetGCPercent(percentFor(liveHeap()))
		t.arm()
	})
}

// sentinel is 16 bytes: smaller pointer-free objects share blocks (the
// runtime's tiny allocator), and a finalizer on one of them need not run
// while another lives.
type sentinel struct{ _ [16]byte }

// liveHeap is the heap the last collection found live, in bytes (0 before
// the first).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func off() {
	debug.SetMemoryLimit(Limit) // first: the heap is never unbounded
	debug.SetGCPercent(-1)
}
