package executor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sched/slots"
)

// slotEvents records the slot waits of a Job's Events.
type slotEvents chan string

func (e slotEvents) WaitingForSlot() { e <- "waiting" }
func (e slotEvents) DoneWaiting()    { e <- "done waiting" }
func (slotEvents) Begun()            {}
func (slotEvents) Queued()           {}
func (slotEvents) Executing()        {}

// pool is a Limiter of a slots.Pool's slots.
type pool struct{ *slots.Pool }

func (p pool) Acquire(ctx context.Context) (func(), error) {
	if err := p.Pool.Acquire(ctx, 0); err != nil {
		return nil, err
	}
	return p.Release, nil
}

// TestSlotEvents: an action waiting for a local slot is reported as
// waiting until it holds one, to the Job's Events.
func TestSlotEvents(t *testing.T) {
	dir := t.TempDir()
	sem := pool{slots.NewPool(1)}
	hold, err := sem.Acquire(t.Context()) // the only slot, as a busy jobserver would
	if err != nil {
		t.Fatal(err)
	}
	events := make(slotEvents, 4)
	a := &action.Action{ID: "m.o", Dir: dir, Args: []action.Arg{{Text: "/bin/sh"}, {Text: "-c"}, {Text: "true"}}}
	done := make(chan error, 1)
	go func() {
		_, err := NewLocal(LocalOptions{Limiter: sem}).Execute(t.Context(), Job{Action: a, Out: []string{filepath.Join(dir, "out.o")}, Events: events})
		done <- err
	}()
	if got := <-events; got != "waiting" {
		t.Fatalf("first event %q", got)
	}
	select {
	case got := <-events:
		t.Fatalf("%q while the slot is still held", got)
	case err := <-done:
		t.Fatalf("ran without a slot: %v", err)
	default:
	}
	hold()
	if got := <-events; got != "done waiting" {
		t.Errorf("second event %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Without Events nothing is reported.
	if _, err := NewLocal(LocalOptions{Limiter: sem}).Execute(t.Context(), Job{Action: a, Out: []string{filepath.Join(dir, "out.o")}}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Errorf("events without Events: %d", len(events))
	}
}

// TestForkServerStartNotInWall: the first job of a compiler starts its
// fork server; that start-up is the pool's figure, not the job's Wall. The
// intervals nest (the start, then the job, inside Execute), so the check
// holds whatever the machine's speed.
func TestForkServerStartNotInWall(t *testing.T) {
	dir := t.TempDir()
	env := os.Environ()
	pool := forkserver.NewPool(t.TempDir(), env, t.Logf)
	defer pool.Close()
	e := NewLocal(LocalOptions{Env: env, Runner: pool.Runner(proc.Exec{}, 0)})
	a := &action.Action{ID: "m.o", Dir: dir, Args: []action.Arg{{Text: "/bin/sh"}, {Text: "-c"}, {Text: "true"}}}
	began := time.Now()
	res, err := e.Execute(t.Context(), Job{Action: a, Out: []string{filepath.Join(dir, "out.o")}})
	took := time.Since(began)
	if err != nil || res.By != proc.ByForkServer {
		t.Skipf("not forked (%v): no fork server here", err)
	}
	st := pool.Stats()
	if st.Servers != 1 || st.Startup <= 0 {
		t.Fatalf("pool stats %+v after the first job", st)
	}
	if res.Wall+st.Startup > took {
		t.Errorf("job Wall %v + server start-up %v > %v spent in Execute: the start-up is counted in the job",
			res.Wall, st.Startup, took)
	}
}
