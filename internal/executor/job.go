package executor

import "github.com/thindist/thindist/internal/action"

// Job is one action as it goes down the executor chain: what to run, where
// its outputs go, and who above wants to hear of its progress. Everything
// an executor needs is here or in its own dependencies; the context that
// comes with a Job is for cancellation and deadlines only. A decorator
// passes the Job on as it came, or a copy changed where its doc says so (a
// Race gives its second side outputs of its own).
type Job struct {
	Action *action.Action
	// Out[i] is where the executor leaves output Action.Outputs[i] (see
	// Executor).
	Out []string
	// Shard is the bytes of the action's index shard as a cache above read
	// them for its key (reapi.Keyer.KeyShard); nil if none did. A remote
	// executor builds its remote action from them instead of reading the
	// file again.
	Shard []byte
	// Begun, if set, is called by the executor that does the job's real
	// work once that begins (a remote executor once the inputs are
	// uploaded, the local one once its process may start); it may be
	// called more than once (a race's two sides). The scheduler uses it to
	// give the actions that bound a link a head start: the rest wait until
	// those have begun, so that the setup of hundreds of others (hashing,
	// uploading) does not delay theirs.
	Begun func()
	// Slots, if set, hears when a local run starts and stops waiting for
	// a process slot.
	Slots SlotObserver
	// Meter, set by Metered, counts the bytes the job moves to and from a
	// remote service (the caches and the remote executor pass it to the
	// calls that move them); nil counts nothing.
	Meter *Transfer
	// Stage, inside a Race, is its remote side's progress: the remote
	// executor marks it, the race's Spare reads it. Nil elsewhere.
	Stage *Stage
}

// Begin tells j's scheduler, if it listens, that j's real work has begun.
func (j Job) Begin() {
	if j.Begun != nil {
		j.Begun()
	}
}
