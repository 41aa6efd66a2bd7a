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
