package executor

import (
	"sync/atomic"
	"time"
)

// Stage is what a Race knows of its remote side's progress: since when
// the action waits in the cluster's queue, and since when a worker runs
// it. It is the Events a Race passes down in place of its Job's: it
// records the stages the remote executor marks and passes every event on
// to the Events it wraps; the race's Spare reads it (Progress). Its
// methods are safe for concurrent use and do nothing on a nil Stage.
type Stage struct {
	queued atomic.Int64 // when it was sent for execution, in Unix nanoseconds; 0: not yet
	since  atomic.Int64 // when a worker took it; 0: not yet
	next   Events       // nil: none
}

// NewStage returns a Stage that passes every event on to next (nil: to
// none).
func NewStage(next Events) *Stage { return &Stage{next: next} }

func (s *Stage) forward() Events {
	if s == nil || s.next == nil {
		return noEvents{}
	}
	return s.next
}

// Begun implements Events.
func (s *Stage) Begun() { s.forward().Begun() }

// WaitingForSlot implements Events.
func (s *Stage) WaitingForSlot() { s.forward().WaitingForSlot() }

// DoneWaiting implements Events.
func (s *Stage) DoneWaiting() { s.forward().DoneWaiting() }

// Queued marks s sent for execution. The first call counts.
func (s *Stage) Queued() {
	if s != nil {
		s.queued.CompareAndSwap(0, time.Now().UnixNano())
	}
	s.forward().Queued()
}

// Executing marks s taken by a worker. The first call counts (a Hedge's
// second worker does not restart the clock).
func (s *Stage) Executing() {
	if s != nil {
		s.since.CompareAndSwap(0, time.Now().UnixNano())
	}
	s.forward().Executing()
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
type Stages []StageMarks

// Queued marks each stage sent for execution.
func (ss Stages) Queued() {
	for _, s := range ss {
		if s != nil {
			s.Queued()
		}
	}
}

// Executing marks each stage taken by a worker.
func (ss Stages) Executing() {
	for _, s := range ss {
		if s != nil {
			s.Executing()
		}
	}
}

// unixTime is the time of a stage's mark, zero for none.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
