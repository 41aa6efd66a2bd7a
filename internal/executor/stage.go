package executor

import (
	"sync/atomic"
	"time"
)

// Stage is what a Race knows of its remote side's progress (Job.Stage):
// since when the action waits in the cluster's queue, and since when a
// worker runs it. The remote executor marks it; the race's Spare reads it.
// Its methods are safe for concurrent use and do nothing on a nil Stage.
type Stage struct {
	queued atomic.Int64 // when it was sent for execution, in Unix nanoseconds; 0: not yet
	since  atomic.Int64 // when a worker took it; 0: not yet
}

// StageMarks hears the stages of a remote execution: *Stage for one
// action, Stages for a group sent as one execution.
type StageMarks interface {
	// Queued: the action was sent for execution; from now until a
	// worker takes it, it waits in the cluster's queue, where a wait long
	// enough says the cluster is narrower than the actions sent to it
	// (Dispatcher).
	Queued()
	// Executing: a remote worker has taken the action; until then it
	// only waits in the cluster's queue, and a free local slot is better
	// spent on it than on one a worker is already running (Dispatcher).
	Executing()
}

// Queued marks s sent for execution. The first call counts.
func (s *Stage) Queued() {
	if s != nil {
		s.queued.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Executing marks s taken by a worker. The first call counts (a Hedge's
// second worker does not restart the clock).
func (s *Stage) Executing() {
	if s != nil {
		s.since.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Progress reports when the action was sent for execution and when a
// worker took it; zero times for what has not happened (all of them for a
// nil s).
func (s *Stage) Progress() (queued, executing time.Time) {
	if s == nil {
		return
	}
	return unixTime(s.queued.Load()), unixTime(s.since.Load())
}

// Stages are the stages of the actions sent as one execution (a
// remote.Grouper's group): what the cluster reports of it is true of each.
// Nil members are skipped.
type Stages []*Stage

// Queued marks each stage sent for execution.
func (ss Stages) Queued() {
	for _, s := range ss {
		s.Queued()
	}
}

// Executing marks each stage taken by a worker.
func (ss Stages) Executing() {
	for _, s := range ss {
		s.Executing()
	}
}

// unixTime is the time of a stage's mark, zero for none.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// isExecuting reports whether a worker has taken the action (false for a
// nil stage: not a race's).
func (s *Stage) isExecuting() bool { return s != nil && s.since.Load() != 0 }

// executingFor is how long a worker has run the action by now (0: none
// has taken it).
func (s *Stage) executingFor(now time.Time) time.Duration {
	if !s.isExecuting() {
		return 0
	}
	return now.Sub(unixTime(s.since.Load()))
}

// sentAt is when the action was sent for execution (zero: not yet, or
// not a race's).
func (s *Stage) sentAt() time.Time {
	if s == nil {
		return time.Time{}
	}
	return unixTime(s.queued.Load())
}

// queuedFor is how long the action has waited in the cluster's queue by
// now: 0 if it was not sent yet or a worker has taken it.
func (s *Stage) queuedFor(now time.Time) time.Duration {
	if s == nil || s.isExecuting() || s.queued.Load() == 0 {
		return 0
	}
	return now.Sub(unixTime(s.queued.Load()))
}
