package dispatch

import (
	"time"

	"github.com/thindist/thindist/internal/action"
)

// Options configures a Dispatcher and its Plan.
type Options struct {
	// RemoteSlots and LocalSlots bound the actions in flight on each
	// side (--remote-jobs, --remote-local-jobs): the remote slots are the
	// Dispatcher's own, the local ones this machine's process slots
	// (Processes), of which it holds at most LocalSlots. With no local
	// slot, every action goes remote and none is raced.
	RemoteSlots, LocalSlots int
	// Races says that the remote side races (executor.Race, with the
	// Dispatcher as its Spare): the actions that bound the link's length
	// are then raced from the start.
	Races bool
	// UploadTime, if set, is how long a's upload to the cluster would
	// still take: its input bytes not yet in the CAS over the upload
	// throughput measured (0: nothing to send, or not known). An action
	// whose upload alone takes longer than compiling it here (its
	// Expected time) compiles here: it waits for a local slot rather
	// than for its upload (choose.go, slowUpload).
	UploadTime func(a *action.Action) time.Duration
}
