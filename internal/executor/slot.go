package executor

import (
	"context"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sched/slots"
)

// Limiter is what a local executor asks for a process slot, which it
// holds for the life of each compiler process: Processes, or Granted in
// a slot a Dispatcher granted above it.
type Limiter interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Processes is this machine's process slots, as a local executor asks for
// one: a slot of Slots (--jobs), then a token of Tokens (make's jobserver),
// if set. Slots is the one count of this machine's processes: a
// Dispatcher grants its local slots from it (NewDispatcher), and the local
// executors beside its Hybrid (Fallback's, LocalFor's) ask through the
// Dispatcher (Dispatcher.Processes), so that it grants again a slot one of
// them frees. Waiters are served in the order they came.
type Processes struct {
	Slots  *slots.Pool
	Tokens Limiter
	// freed, if set, hears each slot given back (Dispatcher.Processes).
	freed func()
}

// Acquire implements Limiter.
func (p Processes) Acquire(ctx context.Context) (func(), error) {
	if err := p.Slots.Acquire(ctx, 0); err != nil {
		p.notify() // a grant that came meanwhile was handed back
		return nil, err
	}
	if p.Tokens == nil {
		return p.release, nil
	}
	token, err := p.Tokens.Acquire(ctx)
	if err != nil {
		p.release()
		return nil, err
	}
	return func() { token(); p.release() }, nil
}

func (p Processes) release() {
	p.Slots.Release()
	p.notify()
}

func (p Processes) notify() {
	if p.freed != nil {
		p.freed()
	}
}

// Granted is the Limiter of a local executor that runs in a slot of
// Processes granted above it (a Dispatcher's: its Hybrid's local runs and
// its races' tries): it asks only for a token of Tokens (make's
// jobserver), if set.
type Granted struct{ Tokens Limiter }

// Acquire implements Limiter.
func (g Granted) Acquire(ctx context.Context) (func(), error) {
	if g.Tokens == nil {
		return func() {}, nil
	}
	return g.Tokens.Acquire(ctx)
}

// String is the note a local executor describes itself with in a
// granted slot ("Local[granted slot]").
func (Granted) String() string { return "granted slot" }

// SlotObserver hears when an action starts waiting for a local process
// slot (a --jobs slot, a token of make's jobserver) and when it stops
// waiting, having got one or not. A progress line uses it to tell actions
// waiting for a slot (queued) from those that run.
type SlotObserver interface {
	WaitingForSlot(a *action.Action)
	DoneWaiting(a *action.Action)
}

// acquire takes a slot of l for j, telling j.Slots, if set, while it
// waits.
func acquire(ctx context.Context, l Limiter, j Job) (func(), error) {
	if j.Slots == nil {
		return l.Acquire(ctx)
	}
	j.Slots.WaitingForSlot(j.Action)
	defer j.Slots.DoneWaiting(j.Action)
	return l.Acquire(ctx)
}
