// Package gctune sets Go's garbage collector for the phases of a run.
//
// thindist's live heap is small and most of what it allocates is garbage
// at once. While it starts (flags, the job file, the connection, the
// history) and while it finishes (the summary, the trace, the record), the
// linker waits for it, and a collection there is pure delay: the runtime's
// minimum heap, scaled down by the low target the backends run at, made
// the start of a 311-job link collect several times, 8 ms of a 33 ms
// start (measured). Those two phases run with the collector off under a
// memory limit, which still bounds the heap; the backends run at Percent,
// as do thindist's other commands.
package gctune

import (
	"math"
	"runtime/debug"
)

// Percent is the GC target while the backends run. thindist's heap is
// mostly short-lived garbage from starting processes and moving blobs,
// its live data (the actions) small: a low target keeps its peak memory
// small beside the compilers it runs (when it was chosen, 10,000 jobs
// peaked at 42 MiB at Go's default of 100, 36 MiB at 50) for a CPU cost
// far below a millisecond per job.
const Percent = 50

// Limit bounds the heap while the collector is off: past it, the runtime
// collects anyway. Whatever the heap reaches there stays resident, so the
// start and the end of a large run set its peak memory: at 32 MiB, 10,000
// no-op jobs peaked at 42.5–43.8 MiB RSS, at 24 MiB at 37.7–37.9 (their
// live heap, at most 13 MB, collected a few times more while it starts).
// A link of a few hundred jobs stays far below either.
const Limit = 24 << 20

// Tuner switches the collector between the phases. Its methods do nothing
// on a nil Tuner.
type Tuner struct{}

// Start turns the collector off under Limit for the start of the run and
// returns the Tuner for its phases. If the user set GOGC, it does nothing
// and returns nil; if only GOMEMLIMIT, it sets Percent and returns nil.
func Start(getenv func(string) string) *Tuner {
	switch {
	case getenv("GOGC") != "":
		return nil
	case getenv("GOMEMLIMIT") != "":
		debug.SetGCPercent(Percent)
		return nil
	}
	off()
	return &Tuner{}
}

// Steady sets the collector for steady work, the backends or a command
// that is not a link (report, stats, cache): Percent, no limit.
func (t *Tuner) Steady() {
	if t == nil {
		return
	}
	debug.SetGCPercent(Percent)
	debug.SetMemoryLimit(math.MaxInt64)
}

// Finishing turns the collector off again, under Limit, once the backends
// have ended.
func (t *Tuner) Finishing() {
	if t == nil {
		return
	}
	off()
}

func off() {
	debug.SetMemoryLimit(Limit) // first: the heap is never unbounded
	debug.SetGCPercent(-1)
}
