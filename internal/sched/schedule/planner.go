package schedule

import "github.com/thindist/thindist/internal/action"

// Planner hands out an executor's slots better knowing the whole run: the
// scheduler tells it every action, in the order it will start them, before
// the first Execute, and tells it when every action has started (Drained)
// and when each has ended (Ended). The Dispatcher of a Hybrid is one
// (package internal/sched/dispatch): it plans the run (NewPlan), races the
// actions that bound the link's length from the start, and spends idle
// local slots on races once drained.
type Planner interface {
	// Plan returns the head start's tiers: tier k is the actions before
	// index tiers[k] and from tiers[k-1] on (tiers increase). The scheduler
	// starts a tier's actions once every action of the tiers before it has
	// begun (executor.Events.Begun) or ended, and the actions after the
	// last tier once every tier's have. None: every action may start at
	// once.
	// est are the estimates the order was made by.
	Plan(order []*action.Action, est *Estimates) (tiers []int)
	Drained()
	// Ended says that a has ended, whether or not it reached the
	// planner's Execute (an executor above it, a cache, may have served
	// it).
	Ended(a *action.Action)
}
