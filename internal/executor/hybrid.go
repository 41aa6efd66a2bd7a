package executor

import (
	"context"
	"sync/atomic"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
)

// Side is where a Hybrid runs an action.
type Side uint8

const (
	RemoteSide Side = iota // remote execution (the Hybrid's remote executor)
	LocalSide              // this machine (its local executor)
)

// Sides is what a Hybrid needs of the scheduler that hands out its slots
// (dispatch.Dispatcher): a side for each action to start, and what each
// side did with it, to choose better for the next.
type Sides interface {
	// Start waits until a slot on either side is granted for a, or ctx
	// ends, and returns the side granted; Release gives it back.
	Start(ctx context.Context, a *action.Action) (Side, error)
	Release(Side)
	// Ran tells of the result of a run on a side that did not fail (a
	// race's result, whichever side won it).
	Ran(a *action.Action, res *Result)
}

// HybridStats are what a Hybrid did in a run.
type HybridStats struct {
	Remote, Local int64 // actions started on each side
	Races         int64 // remote actions that a local run joined
	RacesWonHere  int64 // ... and that the local run won
}

// Hybrid runs each action on whichever side has a free slot, so that with
// remote execution the local cores keep compiling too. Waiting actions
// start in the caller's order (largest or longest expected first),
// whatever order they arrive in: a cache lookup ahead of the Hybrid ends in
// any order.
//
// With races (Options.Races) local slots are the link's reserve against a
// slow or stalled worker (Race; Bazel's dynamic execution does the same):
// actions go to the cluster's slots first and to this machine's once those
// are full or the cluster is backlogged (backlogged), and free local slots
// race remote actions:
//   - Critical actions, those whose length alone is over half the
//     link's expected makespan (NewPlan), are raced from the start: if a
//     worker is slow on one of them nothing else can hide it. At most one
//     per local slot, and only on a cluster seen wider than this machine
//     (raceAtStart); on one no wider they are raced as any other.
//   - Once the caller has started everything (Drained), a free local slot
//     joins the remote action whose result should come last (nextRace):
//     the newest of those still in the cluster's queue, else the one a
//     worker has run longest. Once the cluster has shown itself slower
//     per action than this machine, the one a local run would beat by
//     the most instead (raceSlowCluster).
//   - Before that, a free local slot joins an action that has waited long
//     in the cluster's queue (raceQueued): the cluster is narrower than
//     what was sent to it, and this machine's slots would otherwise idle.
//
// The first verified result wins and the other side is cancelled. Without
// races, this machine's slots are taken first (they are few and certain).
// The aim either way is a cold link no slower than a local one, however
// slow or narrow the cluster. The scheduler's Dispatcher (package
// internal/sched/dispatch) holds the slots and makes these choices; the
// Hybrid runs the action on the side it grants (Sides). A local slot is
// one of this machine's process slots, so the local executor in it waits
// only for make's token, if any.
type Hybrid struct {
	d             Sides
	remote, local Executor

	started [2]atomic.Int64 // by Side
	races   atomic.Int64
	wonHere atomic.Int64
}

// NewHybrid returns the executor choosing between remote and local by the
// slots of d; local runs in the local slot d granted (its Limiter asks for
// no process slot of its own). remote may race on d's spare local slots
// (Race with d as its Spare); it should fall back to local by itself
// (Fallback) where that is wanted: Hybrid only chooses a side.
func NewHybrid(d Sides, remote, local Executor) *Hybrid {
	return &Hybrid{d: d, remote: remote, local: local}
}

// Stats returns the counts of the run so far.
func (h *Hybrid) Stats() HybridStats {
	return HybridStats{Remote: h.started[RemoteSide].Load(), Local: h.started[LocalSide].Load(),
		Races: h.races.Load(), RacesWonHere: h.wonHere.Load()}
}

// Execute implements Executor.
func (h *Hybrid) Execute(ctx context.Context, j Job) (*Result, error) {
	side, err := h.d.Start(ctx, j.Action)
	if err != nil {
		return nil, err
	}
	defer h.d.Release(side)
	h.started[side].Add(1)
	ex := h.remote
	if side == LocalSide {
		ex = h.local
	}
	res, err := ex.Execute(ctx, j)
	if err == nil {
		h.d.Ran(j.Action, res)
	}
	if side == RemoteSide && res != nil && res.Race.Twice() {
		h.races.Add(1)
		if res.Where == Local {
			h.wonHere.Add(1)
		}
	}
	return res, err
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (h *Hybrid) Describe() describe.Node { return node("Hybrid", h.remote, h.local) }

func (h *Hybrid) String() string { return describe.Line(h) }
