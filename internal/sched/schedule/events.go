package schedule

import "github.com/thindist/thindist/internal/action"

// SlotObserver hears when an action starts waiting for a local process
// slot (a --jobs slot, a token of make's jobserver) and when it stops
// waiting, having got one or not. A progress line uses it to tell actions
// waiting for a slot (queued) from those that run.
type SlotObserver interface {
	WaitingForSlot(a *action.Action)
	DoneWaiting(a *action.Action)
}

// jobEvents is the executor.Events of one action Run sends down the
// chain: its Begun lets the head start and the preparation window go on
// (beganFunc), its slot waits go to the run's SlotObserver; a remote
// execution's stages concern only a race below, which records them
// itself (executor.Stage).
type jobEvents struct {
	a     *action.Action
	began func()
	slots SlotObserver // nil: none
}

func (e jobEvents) Begun() { e.began() }

func (e jobEvents) WaitingForSlot() {
	if e.slots != nil {
		e.slots.WaitingForSlot(e.a)
	}
}

func (e jobEvents) DoneWaiting() {
	if e.slots != nil {
		e.slots.DoneWaiting(e.a)
	}
}

func (jobEvents) Queued()    {}
func (jobEvents) Executing() {}
