package executor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/thindist/thindist/internal/action"
)

// HybridOptions configures NewHybrid.
type HybridOptions struct {
	// RemoteSlots and LocalSlots bound the actions in flight on each
	// side (--remote-jobs, --remote-local-jobs). With no local slot,
	// every action goes remote and none is raced.
	RemoteSlots, LocalSlots int
}

// HybridStats are what a Hybrid did in a run.
type HybridStats struct {
	Remote, Local int64 // actions started on each side
	Races         int64 // remote actions that a local run joined
	RacesWonHere  int64 // ... and that the local run won
}

// Hybrid runs each action on whichever side has a free slot, this
// machine's first (its slots are few and certain), so that with remote
// execution the local cores keep compiling too. Callers (the scheduler)
// bring actions largest first; when both sides are full they wait, first
// come first served. Once the scheduler has nothing left to start
// (Drained), free local slots go to races: the remote action that has run
// longest is started locally as well, and whichever side finishes first
// wins (Race). A cold link is then never slower than a local one, however
// slow the cluster.
//
// Under make's jobserver a local slot may still wait for a token in the
// local executor's Limiter; Hybrid counts --jobs only.
type Hybrid struct {
	remote, local Executor
	o             HybridOptions

	mu      sync.Mutex
	free    [2]int // free slots: [remoteSide], [localSide]
	queue   []*hybridWaiter
	spares  []*hybridWaiter // races waiting for a local slot, oldest first
	drained bool

	started [2]atomic.Int64
	races   atomic.Int64
	wonHere atomic.Int64
}

const (
	remoteSide = 0
	localSide  = 1
)

type hybridWaiter struct {
	grant chan int // the side granted; buffered
}

// NewHybrid returns the executor. remote builds the remote side from the
// Hybrid's Spare (for a Race on that side to take the local slots that
// would idle); it should fall back to local by itself (Fallback) where
// that is wanted: Hybrid only chooses a side.
func NewHybrid(remote func(Spare) Executor, local Executor, o HybridOptions) *Hybrid {
	h := &Hybrid{local: local, o: o}
	h.free[remoteSide], h.free[localSide] = max(o.RemoteSlots, 1), max(o.LocalSlots, 0)
	h.remote = remote(h)
	return h
}

// Stats returns the counts of the run so far.
func (h *Hybrid) Stats() HybridStats {
	return HybridStats{Remote: h.started[remoteSide].Load(), Local: h.started[localSide].Load(),
		Races: h.races.Load(), RacesWonHere: h.wonHere.Load()}
}

// Execute implements Executor.
func (h *Hybrid) Execute(ctx context.Context, a *action.Action, out []string) (*Result, error) {
	side, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer h.release(side)
	h.started[side].Add(1)
	if side == localSide {
		return h.local.Execute(ctx, a, out)
	}
	res, err := h.remote.Execute(ctx, a, out)
	if res != nil && res.Raced {
		h.races.Add(1)
		if res.Where == Local {
			h.wonHere.Add(1)
		}
	}
	return res, err
}

// Drained tells the Hybrid that its caller has started every action it
// has: from now on free local slots go to races.
func (h *Hybrid) Drained() {
	h.mu.Lock()
	h.drained = true
	h.dispatch()
	h.mu.Unlock()
}

// Wait implements Spare for the races of remote actions: a local slot,
// once nothing waits for one to start an action.
func (h *Hybrid) Wait(ctx context.Context, _ *action.Action) (func(), error) {
	side, err := h.enqueue(ctx, &h.spares)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { h.release(side) }) }, nil
}

// acquire waits for a slot on either side to start an action.
func (h *Hybrid) acquire(ctx context.Context) (int, error) { return h.enqueue(ctx, &h.queue) }

// enqueue adds a waiter to list and waits for its grant. A waiter that
// gives up is removed; a grant that came meanwhile goes back.
func (h *Hybrid) enqueue(ctx context.Context, list *[]*hybridWaiter) (int, error) {
	w := &hybridWaiter{grant: make(chan int, 1)}
	h.mu.Lock()
	*list = append(*list, w)
	h.dispatch()
	h.mu.Unlock()
	select {
	case side := <-w.grant:
		return side, nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	for i, x := range *list {
		if x == w {
			*list = append((*list)[:i], (*list)[i+1:]...)
			h.mu.Unlock()
			return 0, ctx.Err()
		}
	}
	h.mu.Unlock()
	h.release(<-w.grant)
	return 0, ctx.Err()
}

func (h *Hybrid) release(side int) {
	h.mu.Lock()
	h.free[side]++
	h.dispatch()
	h.mu.Unlock()
}

// dispatch hands free slots to waiters: actions to start first, this
// machine's slots before remote ones; then, once drained, free local slots
// to races, oldest first. h.mu is held.
func (h *Hybrid) dispatch() {
	for len(h.queue) > 0 {
		side := localSide
		if h.free[localSide] == 0 {
			side = remoteSide
			if h.free[remoteSide] == 0 {
				return
			}
		}
		h.free[side]--
		h.queue[0].grant <- side
		h.queue = h.queue[1:]
	}
	for h.drained && len(h.spares) > 0 && h.free[localSide] > 0 {
		h.free[localSide]--
		h.spares[0].grant <- localSide
		h.spares = h.spares[1:]
	}
}
