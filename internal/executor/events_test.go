package executor

import (
	"context"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// countEvents counts the calls of each Events method.
type countEvents struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *countEvents) add(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[name]++
}

func (e *countEvents) Begun()          { e.add("begun") }
func (e *countEvents) WaitingForSlot() { e.add("waiting") }
func (e *countEvents) DoneWaiting()    { e.add("done waiting") }
func (e *countEvents) Queued()         { e.add("queued") }
func (e *countEvents) Executing()      { e.add("executing") }

// progressSpare grants a slot at once, and keeps the primary's progress
// it was given.
type progressSpare struct{ saw chan Progress }

func (s progressSpare) Wait(ctx context.Context, _ *action.Action, primary Progress) (func(), error) {
	s.saw <- primary
	return func() {}, nil
}

// TestRaceEvents: a race passes its Job's Events down to both sides
// through its Stage, which records the remote side's stages for its
// Spare; its second try does not report Begun (the action began with its
// primary), and reports the rest.
func TestRaceEvents(t *testing.T) {
	ev := &countEvents{}
	primary := Func(func(ctx context.Context, j Job) (*Result, error) {
		n := j.Notify()
		n.Begun()
		n.Queued()
		n.Executing()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	secondary := Func(func(ctx context.Context, j Job) (*Result, error) {
		n := j.Notify()
		n.WaitingForSlot()
		n.DoneWaiting()
		n.Begun()
		return newSide(Local, "local").Execute(ctx, j)
	})
	spare := progressSpare{saw: make(chan Progress, 1)}
	out := raceOut(t)
	if _, err := Race(primary, secondary, spare).Execute(t.Context(), Job{Action: raceAction, Out: out, Events: ev}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"begun": 1, "queued": 1, "executing": 1, "waiting": 1, "done waiting": 1}
	for name, n := range want {
		if ev.n[name] != n {
			t.Errorf("the job's Events heard %q %d times, want %d (all: %v)", name, ev.n[name], n, ev.n)
		}
	}
	if (<-spare.saw) == nil {
		t.Fatal("the spare was given no progress")
	}
}

// TestStageForwards: a Stage records Queued and Executing once each and
// passes every event on to the Events it wraps; a nil Stage does nothing.
func TestStageForwards(t *testing.T) {
	ev := &countEvents{}
	s := NewStage(ev)
	s.Queued()
	s.Executing()
	s.Executing()
	s.Begun()
	q, e := s.Progress()
	if q.IsZero() || e.IsZero() || e.Before(q) {
		t.Errorf("progress %v, %v", q, e)
	}
	if ev.n["queued"] != 1 || ev.n["executing"] != 2 || ev.n["begun"] != 1 {
		t.Errorf("passed on %v", ev.n)
	}
	var none *Stage
	none.Queued()
	none.Begun()
	if q, e := none.Progress(); !q.IsZero() || !e.IsZero() {
		t.Errorf("nil stage progress %v, %v", q, e)
	}
}
