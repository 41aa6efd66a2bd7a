package executor

// Events hears what happens to one Job on its way down the chain, as it
// happens: the one channel from the executors back to whoever sent the
// job (the scheduler), beside the Result they return at its end. The
// scheduler implements it for each job it sends (its head start, the
// progress line's queued count); a Race wraps it (Stage) to read its
// remote side's progress. Implementations are safe for concurrent use (a
// race's two sides report at once), and each method may be called more
// than once; none blocks.
type Events interface {
	// Begun: the job's real work has begun, a remote executor's once the
	// inputs are uploaded, a local one's once its process may start. A
	// race's two sides may both report it; its second try does not (it
	// has begun when its primary has). The scheduler gives the actions
	// that bound a link a head start: the rest wait until those have
	// begun, so that the setup of hundreds of others (hashing, uploading)
	// does not delay theirs.
	Begun()
	// WaitingForSlot and DoneWaiting bracket a local run's wait for a
	// process slot (a --jobs slot, a token of make's jobserver), whether
	// it got one or not: a progress line tells actions waiting for a slot
	// (queued) from those that run.
	WaitingForSlot()
	DoneWaiting()
	// Queued and Executing are a remote execution's stages.
	StageMarks
}

// StageMarks hears the stages of a remote execution: one job's Events, or
// Stages for a group sent as one execution.
type StageMarks interface {
	// Queued: the action was sent for execution; from now until a
	// worker takes it, it waits in the cluster's queue, where a wait long
	// enough says the cluster is narrower than the actions sent to it
	// (the Hybrid's Dispatcher).
	Queued()
	// Executing: a remote worker has taken the action; until then it
	// only waits in the cluster's queue, and a free local slot is better
	// spent on it than on one a worker is already running.
	Executing()
}

// noEvents hears nothing (Job.Notify with no Events).
type noEvents struct{}

func (noEvents) Begun()          {}
func (noEvents) WaitingForSlot() {}
func (noEvents) DoneWaiting()    {}
func (noEvents) Queued()         {}
func (noEvents) Executing()      {}
