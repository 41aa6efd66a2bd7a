package schedule

import (
	"context"
	"errors"
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
	"github.com/thindist/thindist/internal/local/proc"
)

func actions(t *testing.T, dir string, n int) []*action.Action {
	var as []*action.Action
	for i := 0; i < n; i++ {
		m := fmt.Sprintf("m%d.o", i)
		// Module sizes grow with i, so largest-first runs them in reverse.
		if err := os.WriteFile(filepath.Join(dir, m), make([]byte, 10+i), 0o644); err != nil {
			t.Fatal(err)
		}
		as = append(as, &action.Action{ID: m, Dir: dir,
			Args:    []action.Arg{action.Lit("cc"), action.In("", 0), action.Out("-o", 0)},
			Inputs:  []action.Input{{Path: m, Role: action.RoleModule}},
			Outputs: []action.Output{{Path: m + ".native.o"}}})
	}
	return as
}

type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) Planned(int, *Estimates) {}
func (r *recorder) Started(a *action.Action, _ int) {
	r.mu.Lock()
	r.order = append(r.order, a.ID)
	r.mu.Unlock()
}
func (r *recorder) Finished(*action.Action, int, *executor.Result, error) {}

func TestRunLargestFirstAndRenamesIntoPlace(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 5)
	write := executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		if filepath.Dir(out[0]) == dir {
			t.Errorf("%s: staged output %s is not in a staging directory", a.ID, out[0])
		}
		return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
	})
	rec := &recorder{}
	if err := Run(context.Background(), as, write, Options{Parallel: 1, Observer: rec}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.order, " "); got != "m4.o m3.o m2.o m1.o m0.o" {
		t.Errorf("start order %s, want largest first", got)
	}
	for _, a := range as {
		data, err := os.ReadFile(filepath.Join(dir, a.Outputs[0].Path))
		if err != nil || string(data) != a.ID {
			t.Errorf("%s: output %q, %v", a.ID, data, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".thindist-*"))
	if len(left) != 0 {
		t.Errorf("staging left behind: %v", left)
	}
}

func TestRunStopsAtFirstFailureAndRemovesOutputs(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 6)
	var ran atomic.Int32
	ex := executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		ran.Add(1)
		if a.ID == "m4.o" {
			return nil, &executor.BackendError{Action: a, Result: &executor.Result{Exit: proc.Exit{ExitCode: 1}}, Reason: "exit status 1"}
		}
		return &executor.Result{}, os.WriteFile(out[0], []byte("x"), 0o644)
	})
	err := Run(context.Background(), as, ex, Options{Parallel: 1})
	var be *executor.BackendError
	if !errors.As(err, &be) || be.Action.ID != "m4.o" {
		t.Fatalf("err = %v, want m4.o's failure", err)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("%d actions ran, want 2 (m5.o, then m4.o failed and nothing more started)", n)
	}
	for _, a := range as {
		if _, err := os.Stat(filepath.Join(dir, a.Outputs[0].Path)); !os.IsNotExist(err) {
			t.Errorf("%s: output of a failed run left behind", a.ID)
		}
	}
}

func TestPreflightNamesMissingInputs(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 2)
	as[1].Inputs = append(as[1].Inputs, action.Input{Path: "gone.o", Role: action.RoleImport})
	ex := executor.Func(func(context.Context, executor.Job) (*executor.Result, error) {
		t.Error("an action ran despite a missing input")
		return &executor.Result{}, nil
	})
	err := Run(context.Background(), as, ex, Options{Parallel: 2})
	if err == nil || !strings.Contains(err.Error(), `m1.o: imported module "gone.o" does not exist`) {
		t.Fatalf("err = %v", err)
	}
}

// planner counts Drained calls and keeps the order Plan was given.
type planner struct {
	tiers   []int
	order   []string
	drained atomic.Int64
	ended   atomic.Int64
}

func (p *planner) Plan(order []*action.Action, _ *Estimates) []int {
	for _, a := range order {
		p.order = append(p.order, a.ID)
	}
	return p.tiers
}
func (p *planner) Drained() { p.drained.Add(1) }

func (p *planner) Ended(*action.Action) { p.ended.Add(1) }

// TestPlanner: the planner hears the actions in the order they start
// (largest first), before any starts; Drained is called once, when the last
// action is handed out, and not before.
func TestPlanner(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 3)
	est := NewEstimates(Weigh(as), map[*action.Action]time.Duration{as[1]: time.Second}) // the longest expected: first
	p := &planner{}
	var seen []string
	ranks := map[string]int{}
	var mu sync.Mutex
	ex := executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s@%d/%d", a.ID, len(p.order), p.drained.Load()))
		ranks[a.ID] = j.Rank
		mu.Unlock()
		return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
	})
	if err := Run(t.Context(), as, ex, Options{Parallel: 1, Planner: p, Estimates: est}); err != nil {
		t.Fatal(err)
	}
	// m1 is expected to take longest; then sizes, largest first.
	want := fmt.Sprintf("[%s@3/0 %s@3/0 %s@3/1]", as[1].ID, as[2].ID, as[0].ID)
	if fmt.Sprint(seen) != want || p.drained.Load() != 1 {
		t.Errorf("started (id@planned/drained): %v, Drained calls %d; want %s, 1", seen, p.drained.Load(), want)
	}
	if fmt.Sprint(p.order) != fmt.Sprint([]string{as[1].ID, as[2].ID, as[0].ID}) {
		t.Errorf("planned order %v", p.order)
	}
	if r := [3]int{ranks[as[0].ID], ranks[as[1].ID], ranks[as[2].ID]}; r != [3]int{2, 0, 1} {
		t.Errorf("jobs' ranks %v, want each action's place in the order (2 0 1)", r)
	}
	if n := p.ended.Load(); n != 3 {
		t.Errorf("Ended called %d times, want once per action (3)", n)
	}
}

// TestHeadStart: the others wait until the head-start actions have begun
// their real work (executor.Events.Begun), not until they end; a head-start action
// that ends without saying so (a cache hit) releases them too.
func TestHeadStart(t *testing.T) {
	for _, begins := range []bool{true, false} {
		dir := t.TempDir()
		as := actions(t, dir, 4) // started m3, m2, m1, m0
		release := make(chan struct{})
		var early atomic.Int64 // others started before the head had begun
		var headBegun atomic.Bool
		ex := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
			a, out := j.Action, j.Out
			if a.ID == "m3.o" {
				// Recorded before Begun: once Begun returns the others
				// may start at any moment, before a later Store.
				headBegun.Store(true)
				if begins {
					j.Notify().Begun()
					<-release // still running while the others go
				}
			} else {
				if !headBegun.Load() {
					early.Add(1)
				}
				if begins {
					select {
					case <-release:
					default:
						close(release) // the head is still running: let it end
					}
				}
			}
			return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
		})
		if err := Run(t.Context(), as, ex, Options{Parallel: 4, Planner: &planner{tiers: []int{1}}}); err != nil {
			t.Fatal(err)
		}
		if early.Load() != 0 {
			t.Errorf("begins=%v: %d actions started before the head-start one had begun", begins, early.Load())
		}
	}
}

// TestHeadStartTiers: each tier of the head start waits until every action
// of the tiers before it has begun, and the rest wait for all tiers; an
// action begun releases the next tier while it still runs.
func TestHeadStartTiers(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 5) // started m4, m3, m2, m1, m0
	var mu sync.Mutex
	begun := map[string]bool{}
	var events []string
	hold := make(chan struct{})
	ex := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		mu.Lock()
		// What had begun when a started: the tiers before it, all of them.
		var before []string
		for _, id := range []string{"m4.o", "m3.o", "m2.o", "m1.o", "m0.o"} {
			if begun[id] {
				before = append(before, id)
			}
		}
		events = append(events, fmt.Sprintf("%s after %v", a.ID, before))
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // preparing: the next tier waits
		mu.Lock()
		begun[a.ID] = true
		mu.Unlock()
		j.Notify().Begun()
		if a.ID == "m4.o" || a.ID == "m3.o" {
			<-hold // the head runs on while the others start
		}
		return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
	})
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), as, ex, Options{Parallel: 5, Planner: &planner{tiers: []int{1, 3}}})
	}()
	// m0 and m1 start only after the second tier (m3, m2) has begun;
	// wait for both, then let the head end.
	for {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n == 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		var want string
		switch e[:4] {
		case "m4.o":
			want = "m4.o after []"
		case "m3.o", "m2.o":
			want = e[:4] + " after [m4.o]"
		default:
			want = e[:4] + " after [m4.o m3.o m2.o]"
		}
		// Later tiers may see more begun (their own tier's), never less.
		if !strings.HasPrefix(e, strings.TrimSuffix(want, "]")) {
			t.Errorf("%q, want %q", e, want)
		}
	}
}

// TestPreparing: with Preparing 2, at most two actions are between their
// start and their beginning at once; one that has begun (and runs on), or
// that ended without beginning (a cache hit), lets the next in; and every
// action still runs, more of them at once than are preparing.
func TestPreparing(t *testing.T) {
	dir := t.TempDir()
	as := actions(t, dir, 8)
	var preparing, most, running, mostRunning atomic.Int32
	peak := func(v *atomic.Int32, n int32) {
		for m := v.Load(); n > m && !v.CompareAndSwap(m, n); m = v.Load() {
		}
	}
	release := make(chan struct{})
	ex := executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		peak(&most, preparing.Add(1))
		time.Sleep(5 * time.Millisecond) // preparing
		preparing.Add(-1)
		if a.ID == "m0.o" || a.ID == "m1.o" {
			// Cache hits: they end without beginning.
			return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
		}
		j.Notify().Begun()
		peak(&mostRunning, running.Add(1))
		defer running.Add(-1)
		select {
		case <-release: // the rest run on until the last has begun
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
	})
	go func() {
		for mostRunning.Load() < 6 {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, as, ex, Options{Parallel: 8, Preparing: 2}); err != nil {
		t.Fatal(err)
	}
	if got := most.Load(); got != 2 {
		t.Errorf("at most %d actions prepared at once, want 2", got)
	}
	if got := mostRunning.Load(); got != 6 {
		t.Errorf("at most %d begun actions ran at once, want all 6", got)
	}
}
