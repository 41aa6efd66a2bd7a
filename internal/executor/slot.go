package executor

import "context"

// Limiter is what a local executor asks for a process slot, which it
// holds for the life of each compiler process: this machine's process
// slots, or only make's token in a slot a scheduler granted above it
// (dispatch.Processes, dispatch.Granted).
type Limiter interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// acquire takes a slot of l for j, telling j's Events while it waits.
func acquire(ctx context.Context, l Limiter, j Job) (func(), error) {
	ev := j.Notify()
	ev.WaitingForSlot()
	defer ev.DoneWaiting()
	return l.Acquire(ctx)
}
