package dispatch

import "time"

// LocalAhead is how many actions per local slot a chain keeps ready
// beyond those running: looked up in the caches, waiting for a slot.
// Without them a local slot that frees stays idle while the next action
// computes its key and waits a round trip for the remote cache
// (docs/architecture.md, "Actions kept ready beyond the slots").
const LocalAhead = 2

// InFlight is how many actions the scheduler keeps in flight
// (schedule.Options.Parallel) over remoteSlots remote slots and
// localSlots local ones: one per slot, and LocalAhead more per local
// slot. With no remote slot (a remote cache alone in front of this
// machine) the remote cache's lookups wait on the network, not on a local
// slot, and the LocalAhead more keep them from leaving the local slots
// idle (and a service that stops answering holds none of them).
func InFlight(remoteSlots, localSlots int) int {
	return remoteSlots + localSlots*(1+LocalAhead)
}

// Preparing is how many actions prepare at once on a remote chain
// (schedule.Options.Preparing) over a service with this round-trip time:
// enough for this machine's cores to stay busy while each waits out the
// round trips of its preparation (the ActionCache lookup,
// FindMissingBlobs, the upload, and one to spare) at about
// preparingCPU each, and no fewer than minPreparing: with every action
// preparing at once the first executions begin late, and with too few
// over a distant service the cluster starves (docs/architecture.md, "How
// many actions prepare at once").
func Preparing(rtt time.Duration, cores int) int {
	const (
		roundTrips   = 4
		preparingCPU = time.Millisecond
		minPreparing = 32
	)
	return max(minPreparing, cores*(1+int(roundTrips*rtt/preparingCPU)))
}
