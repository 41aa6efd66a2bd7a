package pipeline

import (
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestRecordBytesPerAction: each action's record says what it uploaded and
// downloaded, the sums over the actions are the run's totals and the REAPI
// double's own counts, and a blob several actions need (a module that
// another imports) counts for one of them only.
func TestRecordBytesPerAction(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 4, Seed: 3})
	shared := 0 // modules that are another action's import too
	own := map[string]bool{}
	for _, a := range actions {
		own[a.Inputs[0].Path] = true
	}
	for _, a := range actions {
		for _, in := range a.Inputs[1:] {
			if in.Role == action.RoleImport && own[in.Path] {
				shared++
			}
		}
	}
	if shared == 0 {
		t.Fatal("no action imports another's module: the test program shares no blob")
	}

	srv, addr := reapitest.StartT(t, reapitest.Options{})
	run := func(inline bool) *record.Run {
		t.Helper()
		srv.SetInlineOutputs(inline)
		before := srv.Stats()
		cfg := &config.Config{Jobs: 2, Progress: "never", NoCache: true, NoForkServer: true, CacheDir: t.TempDir(),
			Remote: config.Remote{Target: "grpc://" + addr, Fallback: "none", Jobs: 4, LocalJobs: 0, NoRace: true,
				Attempts: 1, Timeout: time.Minute}}
		r := runRecorded(t, cfg, actions)
		after := srv.Stats()

		var up, down int64
		for _, a := range r.Actions {
			up += a.BytesUp
			down += a.BytesDown
			if a.BytesDown < a.ObjectSize {
				t.Errorf("%s (%s): %d bytes down, less than its object's %d", a.Module, a.Where, a.BytesDown, a.ObjectSize)
			}
		}
		if up != r.BytesUp || down != r.BytesDown {
			t.Errorf("the actions sum to %d bytes up and %d down, the run says %d and %d", up, down, r.BytesUp, r.BytesDown)
		}
		// The server counts each blob it received once: the actions'
		// sum matches only if a shared blob counts for one action.
		if got := after.BytesUploadedRaw - before.BytesUploadedRaw; up != got {
			t.Errorf("the actions sum to %d bytes up, the server received %d", up, got)
		}
		if !inline {
			if got := after.BytesReadRaw - before.BytesReadRaw; down != got {
				t.Errorf("the actions sum to %d bytes down, the server sent %d", down, got)
			}
		}
		var totals record.Totals
		totals.Add(r)
		if totals.BytesUp != up || totals.BytesDown != down {
			t.Errorf("stats count %d up and %d down, the actions %d and %d", totals.BytesUp, totals.BytesDown, up, down)
		}
		return r
	}

	// Executed remotely: every action uploads (its own shard, action and
	// command at least) and downloads its object.
	for _, a := range run(false).Actions {
		if a.Where != record.WhereRemote || a.BytesUp == 0 || a.BytesDown == 0 {
			t.Errorf("%s: ran %s with %d bytes up, %d down; want remote, both non-zero", a.Module, a.Where, a.BytesUp, a.BytesDown)
		}
	}
	// Again, from the remote cache with the objects inlined in the
	// results: nothing goes up, the inlined objects come down.
	for _, a := range run(true).Actions {
		if a.Where != record.WhereRemoteCache || a.BytesUp != 0 || a.BytesDown == 0 {
			t.Errorf("%s: ran %s with %d bytes up, %d down; want a remote cache hit, only bytes down", a.Module, a.Where, a.BytesUp, a.BytesDown)
		}
	}
}
