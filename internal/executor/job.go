package executor

import (
	"time"

	"github.com/thindist/thindist/internal/action"
)

// Job is one action as it goes down the executor chain: what to run, where
// its outputs go, and who above hears of its progress (Events). Everything
// an executor needs is here or in its own dependencies; the context that
// comes with a Job is for cancellation and deadlines only. A decorator
// passes the Job on as it came, or a copy changed where its doc says so (a
// Race gives its second side outputs of its own, and Events that record
// its remote side's stages).
type Job struct {
	Action *action.Action
	// Out[i] is where the executor leaves output Action.Outputs[i] (see
	// Executor).
	Out []string
	// Rank is the action's place in its run's start order (0: first), as
	// the scheduler that sent the job ordered it: remote execution passes
	// it on as the execution's priority, so that a cluster with fewer
	// free workers than actions sent also starts the longest first. The
	// order is the scheduler's, not the action's: it goes with the job.
	Rank int
	// Weight and Expected are the scheduler's estimates of the job
	// (schedule.Estimates): its module's bitcode size and how long it is
	// expected to take, from earlier runs; 0 when unknown. An executor
	// that chooses by them (the remote Grouper) reads them here.
	Weight   int64
	Expected time.Duration
	// Events, if set, hears what happens to the job below as it happens
	// (Events); nil hears nothing. Read it through Notify.
	Events Events
	// Shard is the bytes of the action's index shard as a cache above read
	// them for its key (reapi.Keyer.KeyShard); nil if none did. It is an
	// input's contents read once, not a message: an executor may use it in
	// place of reading Action's shard file again (the remote executor
	// builds its remote action from it), and must not otherwise depend on
	// its being set.
	Shard []byte
	// Meter, set by Metered, counts the bytes the job moves to and from a
	// remote service (the caches and the remote executor pass it to the
	// calls that move them); nil counts nothing. It is an accumulator the
	// Metered above owns and reads once the job returns, so it stays a
	// typed field rather than an event: nothing above reacts to it while
	// the job runs.
	Meter *Transfer
}

// Notify is j's Events, or Events that hear nothing if it has none.
func (j Job) Notify() Events {
	if j.Events == nil {
		return noEvents{}
	}
	return j.Events
}
