package remote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sched/slots"
	"github.com/thindist/thindist/internal/testsupport/reapisim"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// shellActions makes n small actions whose "compiler" is a shell script
// that writes "object of <module content>" to the output, a note to
// stderr, and fails (exit 3, "member N broke") for module fail.
func shellActions(t *testing.T, n, fail int) ([]*action.Action, [][]string) {
	return countedActions(t, n, fail, "")
}

// countedActions is shellActions whose every real run appends a line to
// the file counter (outside any execution root), unless counter is "".
func countedActions(t *testing.T, n, fail int, counter string) ([]*action.Action, [][]string) {
	t.Helper()
	dir := t.TempDir()
	script := `printf 'object of %s' "$(cat "$1")" >"$2"; echo "compiled $1" >&2; case $(cat "$1") in *broken*) echo "member $1 broke" >&2; exit 3;; esac`
	if counter != "" {
		script = "echo run >>" + counter + "; " + script
	}
	var as []*action.Action
	var outs [][]string
	for i := 0; i < n; i++ {
		mod, shard := fmt.Sprintf("m%d.o", i), fmt.Sprintf("m%d.thinlto.bc", i)
		content := fmt.Sprintf("module %d", i)
		if i == fail {
			content += " broken"
		}
		if err := os.WriteFile(filepath.Join(dir, mod), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, shard), []byte("shard "+mod), 0o644); err != nil {
			t.Fatal(err)
		}
		as = append(as, &action.Action{
			ID:      mod,
			Dir:     dir,
			Args:    []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit(script), action.Lit("sh"), action.In("", 0), action.Out("", 0)},
			Inputs:  []action.Input{{Path: mod, Role: action.RoleModule}, {Path: shard, Role: action.RoleIndex}},
			Outputs: []action.Output{{Path: mod + ".native.o"}},
		})
		outs = append(outs, []string{filepath.Join(t.TempDir(), "out.o")})
	}
	return as, outs
}

// runAll executes the actions through ex at once, once a backlog has
// formed in front of g's one execution slot (so that they are grouped),
// and returns their results and errors.
func runAll(t *testing.T, srv *reapitest.FakeServer, g *remote.Grouper, ex executor.Executor, as []*action.Action, outs [][]string) ([]*executor.Result, []error) {
	return runAllThen(t, srv, g, ex, as, outs, func() {})
}

// runAllThen is runAll calling armed once the backlog has formed, before
// the actions start (to inject a fault that their group meets).
func runAllThen(t *testing.T, srv *reapitest.FakeServer, g *remote.Grouper, ex executor.Executor, as []*action.Action, outs [][]string, armed func()) ([]*executor.Result, []error) {
	t.Helper()
	release := backlog(t, srv, g)
	armed()
	res, errs := make([]*executor.Result, len(as)), make([]error, len(as))
	var wg sync.WaitGroup
	for i := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = ex.Execute(t.Context(), jobOf(as[i], outs[i]))
		}()
	}
	release(int64(len(as)))
	wg.Wait()
	return res, errs
}

// backlog keeps g's execution slot busy with an action that sleeps on the
// worker until it is cancelled, and returns a function that frees the
// slot (cancels it) once n actions wait for it in groups.
func backlog(t *testing.T, srv *reapitest.FakeServer, g *remote.Grouper) func(n int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	as, outs := shellActions(t, 1, -1)
	as[0].Args = []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit("exec sleep 300")}
	done := make(chan struct{})
	singles := g.Stats().Singles
	go func() {
		defer close(done)
		g.Execute(ctx, jobOf(as[0], outs[0]))
	}()
	waitFor := func(what string, ok func() bool) {
		for start := time.Now(); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > time.Minute { // a safety net, not a timing assumption
				t.Fatalf("%s never happened: grouper %+v", what, g.Stats())
			}
		}
	}
	waitFor("the backlog", func() bool { return g.Stats().Singles > singles })
	return func(n int64) {
		waitFor("the group", func() bool { return g.Stats().Waiting >= n })
		cancel()
		<-done
	}
}

// newGrouper returns a grouper of at most max actions with one execution
// slot.
func newGrouper(t *testing.T, addr string, max int) (*remote.Grouper, *remote.Executor) {
	c := dial(t, addr, remote.Options{})
	ex := remote.NewExecutor(c, remote.ExecOptions{})
	return remote.NewGrouper(ex, slots.NewPool(1), remote.GroupOptions{Max: max}), ex
}

// TestGroupRunsMembersAsOne: four small actions run as one execution on
// the server; each gets its own output, stderr and CPU time.
func TestGroupRunsMembersAsOne(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	g, _ := newGrouper(t, addr, 4)
	as, outs := shellActions(t, 4, -1)
	res, errs := runAll(t, srv, g, g, as, outs)
	for i := range as {
		if errs[i] != nil {
			t.Fatalf("%s: %v", as[i].ID, errs[i])
		}
		got, err := os.ReadFile(outs[i][0])
		if want := fmt.Sprintf("object of module %d", i); err != nil || string(got) != want {
			t.Errorf("%s: output %q (%v), want %q", as[i].ID, got, err, want)
		}
		if want := "compiled m" + fmt.Sprint(i) + ".o"; strings.TrimSpace(string(res[i].Stderr)) != want || res[i].Failed() || res[i].Where != executor.Remote {
			t.Errorf("%s: result %+v, stderr %q; want a remote success with stderr %q", as[i].ID, res[i], res[i].Stderr, want)
		}
	}
	if n := srv.Stats().Executions; n > 2 {
		t.Errorf("%d executions on the server, want one group (and the action that kept the slot busy)", n)
	}
	if st := g.Stats(); st.Groups != 1 || st.Grouped != 4 || st.Reruns != 0 || st.Singles != 1 {
		t.Errorf("stats %+v, want one group of 4 (and the action that kept the slot busy alone)", st)
	}
}

// TestGroupMemberFailure: a member that fails is that member's failure,
// with its own stderr only; the other members' results stand and nothing
// runs again.
func TestGroupMemberFailure(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	g, _ := newGrouper(t, addr, 4)
	as, outs := shellActions(t, 4, 2)
	res, errs := runAll(t, srv, g, executor.Verified(g), as, outs)
	for i := range as {
		if i == 2 {
			var be *executor.BackendError
			if !asBackendError(errs[i], &be) || be.Action != as[2] || res[i].ExitCode != 3 {
				t.Fatalf("the broken member: %v, want its BackendError with exit status 3", errs[i])
			}
			msg := errs[i].Error()
			if !strings.Contains(msg, "member m2.o broke") || strings.Contains(msg, "m1.o") || strings.Contains(msg, "m3.o") {
				t.Errorf("the broken member's error does not show its own stderr alone:\n%s", msg)
			}
			if _, err := os.Stat(outs[i][0]); err == nil {
				t.Errorf("the broken member's output was kept")
			}
			continue
		}
		// Verified rejects the shell's "object" (not ELF): the members
		// that ran fine fail that check, not the group's exit status.
		var be *executor.BackendError
		if !asBackendError(errs[i], &be) || res[i].Failed() || !strings.Contains(be.Reason, "neither an ELF nor a COFF") {
			t.Errorf("%s: %v (result %+v), want its own result, exit status 0", as[i].ID, errs[i], res[i])
		}
	}
	if n, st := srv.Stats().Executions, g.Stats(); n > 2 || st.Groups != 1 || st.Reruns != 0 || st.Singles != 1 {
		t.Errorf("%d executions on the server, grouper %+v; want the group alone (and the action that kept the slot busy): no member runs again", n, st)
	}
}

// TestGroupFaults: a group whose result is faulty (a wrong digest, a
// missing or empty output, an escaping path) never gives a member a wrong
// output: the members run alone again, or fail.
func TestGroupFaults(t *testing.T) {
	for _, f := range []reapitest.Fault{reapitest.FaultWrongOutputDigest, reapitest.FaultMissingOutput,
		reapitest.FaultEscapingOutputPath, reapitest.FaultZeroByteOutput, reapitest.FaultUnavailable} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			srv, addr := fake(t, reapitest.Options{})
			g, _ := newGrouper(t, addr, 4)
			as, outs := shellActions(t, 4, -1)
			res, errs := runAllThen(t, srv, g, g, as, outs, func() { srv.InjectFault(reapitest.MethodExecute, f, 1) })
			for i := range as {
				if errs[i] != nil {
					continue // a clear failure is allowed; a wrong output is not
				}
				got, err := os.ReadFile(outs[i][0])
				if want := fmt.Sprintf("object of module %d", i); err != nil || string(got) != want || res[i].Failed() {
					t.Errorf("%s: WRONG OUTPUT %q (%v), result %+v; want %q", as[i].ID, got, err, res[i], want)
				}
			}
			if srv.PendingFaults(reapitest.MethodExecute, f) != 0 {
				t.Errorf("the fault never fired")
			}
			t.Logf("stats %+v, errors %v", g.Stats(), errs)
		})
	}
}

func asBackendError(err error, be **executor.BackendError) bool {
	if err == nil {
		return false
	}
	b, ok := err.(*executor.BackendError)
	*be = b
	return ok
}

// TestGroupSimulationReplay: the cluster simulation replays a group from
// the recordings of its members run alone (as the benchmark's recording
// link runs them): nothing runs for real, and each member gets its
// recorded output.
func TestGroupSimulationReplay(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "runs")
	as, outs := countedActions(t, 4, -1, counter)
	recSim := reapisim.New(reapisim.Simulation{Record: true, Workers: 2}, false)
	_, recAddr := fake(t, reapitest.Options{Cluster: recSim})
	single := remote.NewExecutor(dial(t, recAddr, remote.Options{}), remote.ExecOptions{})
	for i, a := range as {
		if res, err := single.Execute(t.Context(), jobOf(a, outs[i])); err != nil || res.Failed() {
			t.Fatalf("recording %s: %v %+v", a.ID, err, res)
		}
	}
	if n := recSim.Stats().Recorded; n != 4 {
		t.Fatalf("%d actions recorded, want 4", n)
	}
	runs := func() int {
		b, _ := os.ReadFile(counter)
		return strings.Count(string(b), "run")
	}
	before := runs()

	sim := reapisim.New(reapisim.Simulation{Recording: recSim.Recording(), Workers: 2}, false)
	srv, addr := fake(t, reapitest.Options{Cluster: sim})
	g, _ := newGrouper(t, addr, 4)
	for _, o := range outs {
		os.Remove(o[0])
	}
	res, errs := runAll(t, srv, g, g, as, outs)
	for i := range as {
		got, err := os.ReadFile(outs[i][0])
		if want := fmt.Sprintf("object of module %d", i); errs[i] != nil || err != nil || string(got) != want || res[i].Failed() {
			t.Errorf("%s: %v, output %q (%v), want %q", as[i].ID, errs[i], got, err, want)
		}
	}
	st := sim.Stats()
	if st.Replayed != 4 || runs() != before {
		t.Errorf("replay: %d replayed, %d real runs; want the 4 members replayed and none run", st.Replayed, runs()-before)
	}
	if gs := g.Stats(); gs.Groups != 1 || gs.Reruns != 0 {
		t.Errorf("grouper %+v, want one group and no re-run", gs)
	}
}

// TestGroupReportsExecuting: each member of a group hears, through its
// own race, that the group was sent for execution and that a worker took
// it (executor.Events.Queued, Executing), and tells its scheduler it has
// begun (executor.Events.Begun), as an action sent alone does
// (TestExecReportsExecuting); before, only the member whose context the
// group's was made from did, and the others looked queued to the Hybrid,
// and held their place in the preparation window, for as long as they ran.
func TestGroupReportsExecuting(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	g, _ := newGrouper(t, addr, 4)
	as, outs := shellActions(t, 4, -1)
	spares := make([]*waitingSpare, len(as))
	for i := range spares {
		spares[i] = &waitingSpare{stage: make(chan executor.Progress, 1)}
	}
	local := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	var begun [4]atomic.Bool
	raced := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		a := j.Action
		for i := range as {
			if as[i] == a {
				j.Events = begunEvents(func() { begun[i].Store(true) })
				return executor.Race(g, local, spares[i]).Execute(ctx, j)
			}
		}
		return nil, fmt.Errorf("unknown action %s", a.ID)
	})
	_, errs := runAll(t, srv, g, raced, as, outs)
	for i := range as {
		if errs[i] != nil {
			t.Fatalf("%s: %v", as[i].ID, errs[i])
		}
		if !begun[i].Load() {
			t.Errorf("%s: never told its scheduler it had begun", as[i].ID)
		}
		queued, executing := (<-spares[i].stage).Progress()
		if queued.IsZero() || executing.IsZero() || executing.Before(queued) {
			t.Errorf("%s: its race saw it sent at %v and taken by a worker at %v, want both, in that order", as[i].ID, queued, executing)
		}
	}
	if st := g.Stats(); st.Groups != 1 || st.Grouped != 4 {
		t.Errorf("stats %+v, want one group of 4", st)
	}
}

// begunEvents is Events that hear Begun alone.
type begunEvents func()

func (f begunEvents) Begun()        { f() }
func (begunEvents) WaitingForSlot() {}
func (begunEvents) DoneWaiting()    {}
func (begunEvents) Queued()         {}
func (begunEvents) Executing()      {}

// jobOf is the Job of a as the scheduler sends it, with its module
// weighed (executor.Job.Weight), by which the Grouper groups the small.
func jobOf(a *action.Action, out []string) executor.Job {
	return executor.Job{Action: a, Out: out, Weight: schedule.Weigh([]*action.Action{a})[a]}
}
