package executor

import (
	"context"

	"github.com/thindist/thindist/internal/action"
)

// SlotObserver hears when an action starts waiting for a local process
// slot (a --jobs slot, a token of make's jobserver) and when it stops
// waiting, having got one or not. A progress line uses it to tell actions
// waiting for a slot (queued) from those that run.
type SlotObserver interface {
	WaitingForSlot(a *action.Action)
	DoneWaiting(a *action.Action)
}

type slotObserverKey struct{}

// WithSlotObserver returns a context whose local executions report their
// wait for a slot to o. The observer travels with the context because the
// wait happens deep in the executor chain (below caches, behind a remote
// fallback), which passes the context through untouched.
func WithSlotObserver(ctx context.Context, o SlotObserver) context.Context {
	return context.WithValue(ctx, slotObserverKey{}, o)
}

// acquire takes a slot of l for a, telling ctx's SlotObserver, if any,
// while it waits.
func acquire(ctx context.Context, l Limiter, a *action.Action) (func(), error) {
	o, _ := ctx.Value(slotObserverKey{}).(SlotObserver)
	if o == nil {
		return l.Acquire(ctx)
	}
	o.WaitingForSlot(a)
	defer o.DoneWaiting(a)
	return l.Acquire(ctx)
}
