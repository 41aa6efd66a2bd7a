package dispatch

import (
	"context"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/slots"
)

// Processes is this machine's process slots, as a local executor asks for
// one (executor.Limiter): a slot of Slots (--jobs), then a token of Tokens
// (make's jobserver), if set. Slots is the one count of this machine's
// processes: a Dispatcher grants its local slots from it (NewDispatcher),
// and the local executors beside its Hybrid (Fallback's, LocalFor's) ask
// through the Dispatcher (Dispatcher.Processes), so that it grants again a
// slot one of them frees. Waiters are served in the order they came.
type Processes struct {
	Slots  *slots.Pool
	Tokens executor.Limiter
	// freed, if set, hears each slot given back (Dispatcher.Processes).
	freed func()
}

// Acquire implements executor.Limiter.
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

// Granted is the executor.Limiter of a local executor that runs in a slot
// of Processes granted above it (a Dispatcher's: its Hybrid's local runs
// and its races' tries): it asks only for a token of Tokens (make's
// jobserver), if set.
type Granted struct{ Tokens executor.Limiter }

// Acquire implements executor.Limiter.
func (g Granted) Acquire(ctx context.Context) (func(), error) {
	if g.Tokens == nil {
		return func() {}, nil
	}
	return g.Tokens.Acquire(ctx)
}

// String is the note a local executor describes itself with in a
// granted slot ("Local[granted slot]").
func (Granted) String() string { return "granted slot" }
