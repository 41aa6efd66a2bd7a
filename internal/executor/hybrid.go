package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
)

// HybridOptions configures a Hybrid's Dispatcher and Plan.
type HybridOptions struct {
	// RemoteSlots and LocalSlots bound the actions in flight on each
	// side (--remote-jobs, --remote-local-jobs): the remote slots are the
	// Dispatcher's own, the local ones this machine's process slots
	// (Processes), of which it holds at most LocalSlots. With no local
	// slot, every action goes remote and none is raced.
	RemoteSlots, LocalSlots int
	// Races says that the remote side races (Race, with the Dispatcher as
	// its Spare): the actions that bound the link's length are then raced
	// from the start.
	Races bool
	// UploadTime, if set, is how long a's upload to the cluster would
	// still take: its input bytes not yet in the CAS over the upload
	// throughput measured (0: nothing to send, or not known). An action
	// whose upload alone takes longer than compiling it here (its
	// Expected time) compiles here: it waits for a local slot rather
	// than for its upload (choose.go, slowUpload).
	UploadTime func(a *action.Action) time.Duration
}

// HybridStats are what a Hybrid did in a run.
type HybridStats struct {
	Remote, Local int64 // actions started on each side
	Races         int64 // remote actions that a local run joined
	RacesWonHere  int64 // ... and that the local run won
	RacedAtStart  int64 // races of critical actions, started with the remote run
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
// slow or narrow the cluster. The Dispatcher holds the slots and makes
// these choices (choose.go); the Hybrid runs the action on the side it
// grants. A local slot is one of this machine's process slots
// (Processes), so the local executor in it (Dispatcher.Granted) waits
// only for make's token, if any.
type Hybrid struct {
	d             *Dispatcher
	remote, local Executor

	started [2]atomic.Int64
	races   atomic.Int64
	wonHere atomic.Int64
}

// NewHybrid returns the executor choosing between remote and local by the
// slots of d; local runs in the local slot d granted (its Limiter is
// d.Granted()). remote may race on d's spare local slots (Race with d as
// its Spare); it should fall back to local by itself (Fallback) where that is
// wanted: Hybrid only chooses a side.
func NewHybrid(d *Dispatcher, remote, local Executor) *Hybrid {
	return &Hybrid{d: d, remote: remote, local: local}
}

// Stats returns the counts of the run so far.
func (h *Hybrid) Stats() HybridStats {
	return HybridStats{Remote: h.started[remoteSide].Load(), Local: h.started[localSide].Load(),
		Races: h.races.Load(), RacesWonHere: h.wonHere.Load(), RacedAtStart: h.d.atStart.Load()}
}

// Execute implements Executor.
func (h *Hybrid) Execute(ctx context.Context, j Job) (*Result, error) {
	side, err := h.d.start(ctx, j.Action)
	if err != nil {
		return nil, err
	}
	defer h.d.release(side)
	h.started[side].Add(1)
	ex := h.remote
	if side == localSide {
		ex = h.local
	}
	res, err := ex.Execute(ctx, j)
	if err == nil {
		h.d.observe(j.Action, res)
	}
	if side == remoteSide && res != nil && res.Race.Twice() {
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
