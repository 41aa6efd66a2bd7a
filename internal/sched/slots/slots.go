// Package slots is the one primitive behind every bound on work in
// flight: waiters queued in order for a slot, each granted by the owner of
// the slots, and a waiter that gives up taking nothing, handing back a
// grant that came meanwhile. A Pool owns n slots and hands them out by
// priority; each resource has one Pool, which everything that needs one
// of its slots asks: this machine's process slots (dispatch.Processes,
// which a Dispatcher takes its local slots from too), the remote
// executions a remote.Grouper sends. dispatch.Dispatcher grants the slots
// of its pools by rules of its own, to waiters it keeps in a Queue.
package slots

import (
	"context"
	"sort"
	"sync"
)

// Waiter is what a Queue holds of one waiter: its rank, which orders it
// (lowest first, equal ranks in arrival order), and the channel its grant
// comes on. A waiter type embeds it.
type Waiter struct {
	Rank  int
	grant chan int
}

// NewWaiter returns a waiter of rank rank.
func NewWaiter(rank int) Waiter { return Waiter{Rank: rank, grant: make(chan int, 1)} }

// slot gives Queue access to the Waiter a waiter type embeds.
func (w *Waiter) slot() *Waiter { return w }

// waiter is a type that embeds a Waiter.
type waiter interface{ slot() *Waiter }

// Queue is waiters in order of rank. It is guarded by its owner's lock,
// which every method but Wait expects held.
type Queue[W waiter] []W

// Add queues w after the waiters of its rank and before those of a higher
// one.
func (q *Queue[W]) Add(w W) {
	r := w.slot().Rank
	i := sort.Search(len(*q), func(i int) bool { return (*q)[i].slot().Rank > r })
	var zero W
	*q = append(*q, zero)
	copy((*q)[i+1:], (*q)[i:])
	(*q)[i] = w
}

// Grant removes waiter i from q and grants it g.
func (q *Queue[W]) Grant(i, g int) {
	(*q)[i].slot().grant <- g
	*q = append((*q)[:i], (*q)[i+1:]...)
}

// remove takes w out of q, reporting whether it was there.
func (q *Queue[W]) remove(w W) bool {
	for i, x := range *q {
		if x.slot() == w.slot() {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// Wait waits for w's grant, w having been added to q (its owner then
// grants what it can). If ctx ends first, w is taken out of q under mu,
// q's lock, which Wait must not be called with; a grant that came
// meanwhile goes to giveBack, called without mu held, and Wait returns
// ctx's error.
func Wait[W waiter](ctx context.Context, mu sync.Locker, q *Queue[W], w W, giveBack func(int)) (int, error) {
	select {
	case g := <-w.slot().grant:
		return g, nil
	case <-ctx.Done():
	}
	mu.Lock()
	removed := q.remove(w)
	mu.Unlock()
	if !removed {
		giveBack(<-w.slot().grant)
	}
	return 0, ctx.Err()
}

// Pool is n slots handed out by priority: a freed slot goes to the first
// waiter of the lowest priority value. Safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	free    int
	waiting Queue[*poolWaiter]
}

type poolWaiter struct{ Waiter }

// NewPool returns a pool of n slots (at least 1).
func NewPool(n int) *Pool { return &Pool{free: max(n, 1)} }

// TryAcquire takes a free slot if there is one.
func (p *Pool) TryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free > 0 {
		p.free--
		return true
	}
	return false
}

// Acquire waits for a slot, behind the waiters of its priority and of
// lower values. A waiter whose ctx ends takes no slot.
func (p *Pool) Acquire(ctx context.Context, priority int) error {
	p.mu.Lock()
	if p.free > 0 {
		p.free--
		p.mu.Unlock()
		return nil
	}
	w := &poolWaiter{NewWaiter(priority)}
	p.waiting.Add(w)
	p.mu.Unlock()
	_, err := Wait(ctx, &p.mu, &p.waiting, w, func(int) { p.Release() })
	return err
}

// Release frees a slot: to the first waiter, if any.
func (p *Pool) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiting) > 0 {
		p.waiting.Grant(0, 0)
		return
	}
	p.free++
}

// Free is how many slots are free now (none while a waiter waits). An
// owner that grants slots by rules of its own reads it, then takes each
// slot with TryAcquire, which may still find it gone.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free
}

// Waiting is how many wait for a slot of priority.
func (p *Pool) Waiting(priority int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.waiting {
		if w.Rank == priority {
			n++
		}
	}
	return n
}
