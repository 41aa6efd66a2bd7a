package dispatch

import (
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
)

// TestHybridSlowUploadCompilesHere: with races the cluster's free slots
// are taken first, but an action whose upload alone would take longer
// than compiling it here (Options.UploadTime over its expected
// time) takes this machine's slot, or waits for it while others go to
// the cluster; one whose upload is quicker than its compile, or whose
// time is not known, goes to the cluster as before.
func TestHybridSlowUploadCompilesHere(t *testing.T) {
	remote, local := newHeld(executor.Remote), newHeld(executor.Local)
	upload := map[string]time.Duration{"big1": 10 * time.Second, "big2": 10 * time.Second, "quick": 100 * time.Millisecond}
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local, Options{RemoteSlots: 4, LocalSlots: 1, Races: true,
		UploadTime: func(a *action.Action) time.Duration { return upload[a.ID] }})
	est := newEstimates()
	acts := map[string]*action.Action{}
	for id, expected := range map[string]time.Duration{"big1": time.Second, "big2": time.Second, "quick": time.Second, "unknown": 0} {
		acts[id] = est.expecting(&action.Action{ID: id}, expected)
	}
	h.d.Plan(nil, est.of()) // none planned: they start as they come
	start := func(id string) {
		go h.Execute(t.Context(), executor.Job{Action: acts[id]})
	}
	start("big1")
	expectStart(t, "big1", local, remote)
	start("big2") // the local slot is busy: it waits for it
	waitQueue(t, h, 1)
	start("quick")
	expectStart(t, "quick", remote, local)
	start("unknown") // no expected time: nothing to weigh the upload against
	expectStart(t, "unknown", remote, local)
	local.release <- struct{}{} // big1 ends
	expectStart(t, "big2", local, remote)
	if st := h.Stats(); st.Local != 2 || st.Remote != 2 {
		t.Errorf("stats %+v, want 2 actions started on each side", st)
	}
}
