// Package gctune sets Go's garbage collector for the phases of a run.
//
// thindist's live heap is small and most of what it allocates is garbage
// at once. While it starts (flags, the job file, the connection, the
// history) and while it finishes (the summary, the trace, the record), the
// linker waits for it, and a collection there is pure delay: the runtime's
// minimum heap, scaled down by the low target the backends run at, would
// make a large link's start collect several times. Those two phases run
// with the collector off under a memory limit, which still bounds the
// heap. The backends, and thindist's other commands, run at a target that
// follows the live heap (Steady). See docs/design.md, "Collector phases".
package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A Budget sets the steady phase's GC target from the live heap each
// collection leaves: between MinPercent and MaxPercent, as high as keeps
// the heap's peak within Peak.
type Budget struct {
	MinPercent, MaxPercent int
	Peak                   uint64
}

// Local is the budget of a run whose backends all run on this machine,
// and of thindist's other commands.
//
// Almost all a link allocates is garbage at once (messages, blobs,
// contexts): at Go's default of 100 it collects half as often as at 50.
// A large link's live heap (the actions, the record) would at 100 peak at
// twice its size, so there the target comes down, to MinPercent at the
// least: a live heap up to half of Peak still collects at 100, a larger
// one at the target that keeps its peak at Peak (see docs/design.md,
// "Collector phases").
func Local() Budget { return Budget{MinPercent: 50, MaxPercent: 100, Peak: 14 << 20} }

// Remote is the budget of a link that sends its actions to a remote
// cache or cluster. Each action allocates there (its key, its messages,
// its RPCs), and the collector's work grows with what is allocated over
// the target, while a large remote link's live heap (every action's
// state, the trace) grows past Local's Peak. So the target stays at 100
// at the least, and at 200 while the heap's peak stays within Peak.
func Remote() Budget { return Budget{MinPercent: 100, MaxPercent: 200, Peak: 128 << 20} }

// percentFor is b's target for a live heap of live bytes (0: not known
// yet, no collection so far).
func (b Budget) percentFor(live uint64) int {
	if live == 0 {
		return b.MaxPercent
	}
	if live >= b.Peak {
		return b.MinPercent
	}
	return min(b.MaxPercent, max(b.MinPercent, int((b.Peak-live)*100/live)))
}

// Limit bounds the heap while the collector is off: past it, the runtime
// collects anyway. Whatever the heap reaches there stays resident, so the
// start and the end of a large run set its peak memory: the limit is as
// low as lets a large run start without collecting over and over. A link
// of a few hundred jobs stays far below it.
const Limit = 24 << 20

// Tuner switches the collector between the phases. Its methods do nothing
// on a nil Tuner.
type Tuner struct {
	mu     sync.Mutex
	steady bool   // in the steady phase: each collection sets the target
	budget Budget // the steady phase's
	armed  bool   // a sentinel waits for the next collection
}

// Start turns the collector off under Limit for the start of the run and
// returns the Tuner for its phases. If the user set GOGC, it does nothing
// and returns nil; if only GOMEMLIMIT, it sets Local's MinPercent (the
// user's limit, not the tuner, bounds the heap) and returns nil.
func Start(getenv func(string) string) *Tuner {
	switch {
	case getenv("GOGC") != "":
		return nil
	case getenv("GOMEMLIMIT") != "":
		debug.SetGCPercent(Local().MinPercent)
		return nil
	}
	off()
	return &Tuner{}
}

// Steady sets the collector for steady work, the backends or a command
// that is not a link (report, stats, cache): no limit, and a target that
// each collection sets again from the live heap it leaves, within b.
func (t *Tuner) Steady(b Budget) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steady, t.budget = true, b
	debug.SetGCPercent(b.percentFor(liveHeap()))
	debug.SetMemoryLimit(math.MaxInt64)
	if !t.armed {
		t.armed = true
		t.arm()
	}
}

// Finishing turns the collector off again once the backends have ended,
// under Limit or, if larger, the heap goal the steady phase had reached:
// the heap may grow as large as it already could, and no larger. Under
// Limit alone, a remote link whose live heap had grown past it would
// collect back to back while it wrote its summary and trace.
func (t *Tuner) Finishing() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steady = false
	offUnder(max(Limit, heapGoal()))
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
		debug.SetGCPercent(t.budget.percentFor(liveHeap()))
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

func off() { offUnder(Limit) }

// offUnder turns the collector off with the heap bounded by limit.
func offUnder(limit int64) {
	debug.SetMemoryLimit(limit) // first: the heap is never unbounded
	debug.SetGCPercent(-1)
}

// heapGoal is the heap size at which the collector would start its next
// collection (0 if the runtime does not say).
func heapGoal() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
