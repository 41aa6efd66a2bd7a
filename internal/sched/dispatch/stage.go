package dispatch

import (
	"time"

	"github.com/thindist/thindist/internal/executor"
)

// What the rules read of a race's remote side (its executor.Progress, nil
// for a waiter that is not a race's).

// progressOf is s's progress, none for a nil s.
func progressOf(s executor.Progress) (queued, executing time.Time) {
	if s == nil {
		return
	}
	return s.Progress()
}

// isExecuting reports whether a worker has taken the action.
func isExecuting(s executor.Progress) bool {
	_, executing := progressOf(s)
	return !executing.IsZero()
}

// executingFor is how long a worker has run the action by now (0: none
// has taken it).
func executingFor(s executor.Progress, now time.Time) time.Duration {
	_, executing := progressOf(s)
	if executing.IsZero() {
		return 0
	}
	return now.Sub(executing)
}

// sentAt is when the action was sent for execution (zero: not yet).
func sentAt(s executor.Progress) time.Time {
	queued, _ := progressOf(s)
	return queued
}

// queuedFor is how long the action has waited in the cluster's queue by
// now: 0 if it was not sent yet or a worker has taken it.
func queuedFor(s executor.Progress, now time.Time) time.Duration {
	queued, executing := progressOf(s)
	if queued.IsZero() || !executing.IsZero() {
		return 0
	}
	return now.Sub(queued)
}
