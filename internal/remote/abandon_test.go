package remote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// gatedAction is an action whose "compiler" waits for the file gate
// before writing its output.
func gatedAction(t *testing.T, gate string) (*action.Action, []string) {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.01; done; printf 'object of %%s' "$(cat "$1")" >"$2"`, gate)
	if err := os.WriteFile(filepath.Join(dir, "m.o"), []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.thinlto.bc"), []byte("shard m.o"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &action.Action{
		ID: "m.o", Dir: dir,
		Args:    []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit(script), action.Lit("sh"), action.In("", 0), action.Out("", 0)},
		Inputs:  []action.Input{{Path: "m.o", Role: action.RoleModule}, {Path: "m.thinlto.bc", Role: action.RoleIndex}},
		Outputs: []action.Output{{Path: "m.o.native.o"}},
	}
	return a, []string{filepath.Join(t.TempDir(), "out.o")}
}

// executingSpare grants a slot once a worker runs the race's remote side.
type executingSpare struct{}

func (executingSpare) Wait(ctx context.Context, _ *action.Action, primary executor.Progress) (func(), error) {
	for {
		if _, executing := primary.Progress(); !executing.IsZero() {
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// TestRaceWonHereLeavesResultInAC: against a service whose ActionCache
// clients may not write (stock Buildbarn), a race won here while a worker
// runs the remote side leaves that execution to finish (FinishAbandoned):
// the race returns the local result at once, and the server then stores
// the remote result in its ActionCache, where a later link finds it.
// Before, the race cancelled the execution and nothing was stored (issue
// 48, item 10).
func TestRaceWonHereLeavesResultInAC(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{ACUpdateDisabled: true})
	c := dial(t, addr, remote.Options{})
	ex := remote.NewExecutor(c, remote.ExecOptions{FinishAbandoned: !c.ACUpdateEnabled()})
	gate := filepath.Join(t.TempDir(), "gate")
	a, out := gatedAction(t, gate)
	local := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		return &executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, os.WriteFile(j.Out[0], []byte("local object"), 0o644)
	})
	res, err := executor.Race(ex, local, executingSpare{}).Execute(t.Context(), executor.Job{Action: a, Out: out})
	if err != nil || res.Where != executor.Local {
		t.Fatalf("race: %v %+v, want the local side's result", err, res)
	}
	if got, _ := os.ReadFile(out[0]); string(got) != "local object" {
		t.Errorf("output %q, want the local side's", got)
	}
	if n := ex.Stats().Finishing; n != 1 {
		t.Errorf("%d executions left to finish, want 1", n)
	}
	// The worker finishes once let go; the server then either stores its
	// result or has cancelled the execution.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := reapi.BuildExecutable(a, reapi.ExecOptions{Files: digest.NewFiles()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := srv.ActionResult("", exe.ActionDigest.Proto()); ok || srv.Stats().Cancellations > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the execution neither finished nor was cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := srv.Stats(); st.Cancellations != 0 {
		t.Fatalf("the remote execution was cancelled when the local side won (%d cancellations): nothing stored", st.Cancellations)
	}
	// A later link's lookup is served from the server's ActionCache.
	again, err := remote.NewExecutor(c, remote.ExecOptions{}).Execute(t.Context(), executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "again.o")}})
	if err != nil || again.Where != executor.RemoteCache {
		t.Errorf("relink: %v %+v, want a hit in the server's ActionCache", err, again)
	}
}
