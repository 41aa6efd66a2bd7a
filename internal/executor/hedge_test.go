package executor

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// TestHedgeSecondWins: a picked action runs on both executors at once; the
// second one's result is used when the first stalls, the first is
// cancelled, and the result and the stats say so.
func TestHedgeSecondWins(t *testing.T) {
	first, second := newSide(Remote, "first"), newSide(Remote, "second")
	first.hold = make(chan struct{}) // a slow worker: never done
	h := NewHedge(first, second, func(a *action.Action) bool { return a == raceAction })
	out := raceOut(t)
	res, err := h.Execute(boundedCtx(t), Job{Action: raceAction, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hedge != SecondWon || res.Race != Once {
		t.Errorf("result hedge %v, race %v, want a hedge won by the second execution (not a race)", res.Hedge, res.Race)
	}
	if first.cancelled.Load() != 1 || !first.stopped.Load() {
		t.Errorf("the stalled first execution: cancelled %d times, stopped %v; want cancelled and stopped", first.cancelled.Load(), first.stopped.Load())
	}
	checkOutputs(t, out, "second", first, second)
	if st := h.Stats(); st != (HedgeStats{Hedged: 1, Won: 1}) {
		t.Errorf("stats %+v, want 1 hedged, 1 won by the second", st)
	}
}

// TestHedgeFirstWins: when the first execution ends first, its result is
// used in place and the second is cancelled.
func TestHedgeFirstWins(t *testing.T) {
	first, second := newSide(Remote, "first"), newSide(Remote, "second")
	second.hold = make(chan struct{})
	first.hold = make(chan struct{})
	h := NewHedge(first, second, func(*action.Action) bool { return true })
	out := raceOut(t)
	go func() {
		<-second.started // both run before the first ends
		close(first.hold)
	}()
	res, err := h.Execute(boundedCtx(t), Job{Action: raceAction, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hedge != FirstWon {
		t.Errorf("result hedge %v, want a hedge the first execution won", res.Hedge)
	}
	if second.cancelled.Load() != 1 {
		t.Errorf("second execution cancelled %d times, want once", second.cancelled.Load())
	}
	checkOutputs(t, out, "first", first, second)
	if st := h.Stats(); st != (HedgeStats{Hedged: 1, Won: 0}) {
		t.Errorf("stats %+v, want 1 hedged, none won by the second", st)
	}
}

// TestHedgeOnlyPicked: an action pick does not choose runs once, on the
// first executor.
func TestHedgeOnlyPicked(t *testing.T) {
	first, second := newSide(Remote, "first"), newSide(Remote, "second")
	h := NewHedge(first, second, func(*action.Action) bool { return false })
	out := raceOut(t)
	res, err := h.Execute(boundedCtx(t), Job{Action: raceAction, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.started:
		t.Error("the second executor ran an action that was not picked")
	default:
	}
	if res.Hedge != Once {
		t.Errorf("result says hedged: %v", res.Hedge)
	}
	checkOutputs(t, out, "first", first, second)
	if st := h.Stats(); st != (HedgeStats{}) {
		t.Errorf("stats %+v, want none", st)
	}

	// It is a plain call of the first executor, with the caller's own
	// context: no race (and none of a race's goroutines) around it.
	ctx := boundedCtx(t)
	var same bool
	plain := NewHedge(Func(func(got context.Context, j Job) (*Result, error) {
		same = got == ctx
		return &Result{Provenance: Provenance{Where: Remote}}, nil
	}), second, func(*action.Action) bool { return false })
	if _, err := plain.Execute(ctx, Job{Action: raceAction, Out: raceOut(t)}); err != nil || !same {
		t.Errorf("an action not picked: %v, called with the caller's context %v; want a plain call", err, same)
	}
	// What a failed primary left is removed, as a race removes it.
	failing := NewHedge(Func(func(_ context.Context, j Job) (*Result, error) {
		out := j.Out
		if err := os.WriteFile(out[0], []byte("half"), 0o644); err != nil {
			return nil, err
		}
		return nil, errors.New("failed")
	}), second, func(*action.Action) bool { return false })
	failedOut := raceOut(t)
	if _, err := failing.Execute(ctx, Job{Action: raceAction, Out: failedOut}); err == nil {
		t.Error("a failed primary's error was lost")
	}
	if _, err := os.Stat(failedOut[0]); !os.IsNotExist(err) {
		t.Errorf("a failed primary's output is still there (%v)", err)
	}
}

// TestHedgeInsideRace: a hedge is the primary side of a Race (as the
// pipeline composes them): three executions at once, each writing a path
// of its own; the local one wins and both remote ones are cancelled.
func TestHedgeInsideRace(t *testing.T) {
	first, second, local := newSide(Remote, "first"), newSide(Remote, "second"), newSide(Local, "local")
	first.hold, second.hold = make(chan struct{}), make(chan struct{})
	local.hold = make(chan struct{})
	go func() {
		<-first.started
		<-second.started
		close(local.hold) // all three run at once before one ends
	}()
	ex := Race(NewHedge(first, second, func(*action.Action) bool { return true }), local, grantedSpare())
	out := raceOut(t)
	res, err := ex.Execute(boundedCtx(t), Job{Action: raceAction, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Where != Local || res.Race != SecondWon || res.Hedge != Once {
		t.Errorf("result where=%v race %v hedge %v, want the local side's, which won a race, not hedged", res.Where, res.Race, res.Hedge)
	}
	if first.cancelled.Load() != 1 || second.cancelled.Load() != 1 {
		t.Errorf("remote executions cancelled %d and %d times, want once each", first.cancelled.Load(), second.cancelled.Load())
	}
	checkOutputs(t, out, "local", first, second, local)
}

// boundedCtx ends a test's executions after a minute, so that a hedge
// that never starts fails the test instead of hanging it: every side
// held here waits for its context.
func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
