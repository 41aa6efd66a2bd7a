package executor

import (
	"context"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// held is a fake executor whose calls block until released, reporting
// each start on a channel.
type held struct {
	where   Where
	started chan string
	release chan struct{}
}

func newHeld(where Where) *held {
	return &held{where: where, started: make(chan string, 16), release: make(chan struct{})}
}

func (h *held) Execute(ctx context.Context, a *action.Action, out []string) (*Result, error) {
	h.started <- a.ID
	select {
	case <-h.release:
		return &Result{Where: h.where}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// byID sends each action to the executor of its ID.
type byID map[string]Executor

func (m byID) Execute(ctx context.Context, a *action.Action, out []string) (*Result, error) {
	return m[a.ID].Execute(ctx, a, out)
}

// TestHybridFillsBothSides: this machine's slots fill first, then the
// remote ones; a further action waits for a free slot on either side.
func TestHybridFillsBothSides(t *testing.T) {
	remote, local := newHeld(Remote), newHeld(Local)
	h := NewHybrid(func(Spare) Executor { return remote }, local, HybridOptions{RemoteSlots: 2, LocalSlots: 1})
	var wg sync.WaitGroup
	run := func(id string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Execute(t.Context(), &action.Action{ID: id}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	run("a")
	if got := <-local.started; got != "a" {
		t.Fatalf("the first action went remote")
	}
	run("b")
	run("c")
	<-remote.started
	<-remote.started
	run("d") // every slot is taken: it waits
	select {
	case id := <-local.started:
		t.Fatalf("%s started locally with every slot taken", id)
	case id := <-remote.started:
		t.Fatalf("%s started remotely with every slot taken", id)
	default:
	}
	local.release <- struct{}{} // "a" ends: "d" takes its local slot
	if got := <-local.started; got != "d" {
		t.Fatalf("%s started locally, want d", got)
	}
	close(local.release)
	close(remote.release)
	wg.Wait()
	if st := h.Stats(); st.Local != 2 || st.Remote != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestHybridRacesOnceDrained: a free local slot goes to a race only once
// the caller has started everything (Drained), and then to the remote
// action that has run longest.
func TestHybridRacesOnceDrained(t *testing.T) {
	remote := newSide(Remote, "remote")
	remote.hold = make(chan struct{}) // the cluster stalls
	local := newSide(Local, "local")
	// The local slot is busy with an action of its own, "first".
	busy := newHeld(Local)
	h := NewHybrid(func(spare Spare) Executor { return Race(remote, local, spare) },
		byID{"first": busy}, HybridOptions{RemoteSlots: 4, LocalSlots: 1})
	done := make(chan error, 1)
	go func() {
		_, err := h.Execute(t.Context(), &action.Action{ID: "first"}, nil)
		done <- err
	}()
	<-busy.started
	out := raceOut(t)
	res := make(chan *Result, 1)
	go func() {
		r, err := h.Execute(t.Context(), &action.Action{ID: "m.o"}, out)
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	<-remote.started
	close(busy.release) // the local slot frees, but the caller is not drained
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-local.started:
		t.Fatal("a race started before the caller had started everything")
	default:
	}
	h.Drained()
	r := <-res
	if r == nil || r.Where != Local || !r.Raced {
		t.Fatalf("result %+v, want the local side of a race", r)
	}
	if remote.cancelled.Load() != 1 {
		t.Errorf("the stalled remote side was not cancelled")
	}
	if st := h.Stats(); st.Races != 1 || st.RacesWonHere != 1 {
		t.Errorf("stats %+v", st)
	}
	checkOutputs(t, out, "local", remote, local)
}
