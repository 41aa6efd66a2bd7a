package dispatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
)

// TestHybridSharesProcessSlots: the Hybrid's local slots are this
// machine's process slots, counted once: one that a local executor beside
// the Hybrid holds (a fallback's) is not granted, the action goes to the
// cluster instead; once given back, it is granted to the next action.
func TestHybridSharesProcessSlots(t *testing.T) {
	remote, local := newHeld(executor.Remote), newHeld(executor.Local)
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local, Options{RemoteSlots: 1, LocalSlots: 1})
	procs := h.d.Processes()
	fallback, err := procs.Acquire(t.Context()) // the one process slot
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	run := func(id string) {
		wg.Go(func() {
			_, err := h.Execute(t.Context(), executor.Job{Action: &action.Action{ID: id}})
			errs <- err
		})
	}
	run("a") // without races, local first: but the process slot is taken
	select {
	case <-remote.started:
	case <-local.started:
		t.Fatal("a started here in the process slot a fallback holds")
	}
	run("b") // no slot on either side: it waits
	waitQueue(t, h, 1)
	fallback() // the fallback ends: its slot goes to b
	if got := <-local.started; got != "b" {
		t.Fatalf("%s started locally, want b", got)
	}
	if procs.Slots.TryAcquire() {
		t.Errorf("a process slot was free while b ran here in the only one")
	}
	close(local.release)
	close(remote.release)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	checkSlotsBack(t, h, 1, 1)
}

// TestHybridGivesEverySlotBack: however the actions end (won here or on
// the cluster, cancelled while they run or while they wait for a slot, a
// grant that came meanwhile handed back), and whatever the local
// executors beside the Hybrid take meanwhile, no more processes run here
// at once than this machine has slots, and every slot is back with its
// owner once all have returned.
func TestHybridGivesEverySlotBack(t *testing.T) {
	const processes = 2
	var here, most atomic.Int64 // processes running here, and the most at once
	enter := func() func() {
		n := here.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return func() { here.Add(-1) }
	}
	remote, local := &jittery{where: executor.Remote}, &jittery{where: executor.Local, enter: enter}
	h := newHybrid(func(spare executor.Spare) executor.Executor { return executor.Race(remote, local, spare) }, local,
		Options{RemoteSlots: 3, LocalSlots: processes, Races: true})
	procs := h.d.Processes()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 300 {
		ctx, cancel := context.WithCancel(t.Context())
		if i%3 == 0 {
			time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
		}
		wg.Go(func() {
			defer cancel()
			out := []string{fmt.Sprintf("%s/%d.o", dir, i)}
			h.Execute(ctx, executor.Job{Action: &action.Action{ID: fmt.Sprint(i)}, Out: out})
		})
		if i%10 == 0 {
			wg.Go(func() { // a fallback, beside the Hybrid
				release, err := procs.Acquire(ctx)
				if err != nil {
					return
				}
				defer release()
				defer enter()()
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			})
		}
		if i == 150 {
			h.d.Drained() // from now on free local slots race
		}
	}
	wg.Wait()
	if m := most.Load(); m > processes {
		t.Errorf("%d processes ran here at once, on %d process slots", m, processes)
	}
	checkSlotsBack(t, h, 3, processes)
	if remote.runs.Load() == 0 || local.runs.Load() == 0 {
		t.Errorf("ran %d times remotely, %d times here: want both sides used", remote.runs.Load(), local.runs.Load())
	}
}

// jittery is a side that runs for up to a millisecond (or until
// cancelled), inside enter's bracket if set, and writes its output.
type jittery struct {
	where executor.Where
	enter func() (leave func())
	runs  atomic.Int64
}

func (f *jittery) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	if f.enter != nil {
		defer f.enter()()
	}
	f.runs.Add(1)
	select {
	case <-time.After(time.Duration(rand.IntN(1000)) * time.Microsecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := os.WriteFile(j.Out[0], []byte(f.where.String()), 0o644); err != nil {
		return nil, err
	}
	return &executor.Result{Provenance: executor.Provenance{Where: f.where}}, nil
}

// checkSlotsBack fails unless every slot of h is free: remote of its own,
// local of this machine's process slots, and it holds none and has no
// waiter.
func checkSlotsBack(t *testing.T, h *testHybrid, remote, local int) {
	t.Helper()
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if got := h.d.pools[remoteSide].Free(); got != remote {
		t.Errorf("%d of %d remote slots free once every action returned", got, remote)
	}
	if got := h.d.local.Slots.Free(); got != local {
		t.Errorf("%d of %d process slots free once every action returned", got, local)
	}
	if h.d.localHeld != 0 || len(h.d.queue) != 0 || len(h.d.spares) != 0 {
		t.Errorf("the Dispatcher holds %d local slots, with %d actions and %d races waiting, once every action returned",
			h.d.localHeld, len(h.d.queue), len(h.d.spares))
	}
}

// waitQueue waits until n actions wait in h to start.
func waitQueue(t *testing.T, h *testHybrid, n int) {
	t.Helper()
	for {
		h.d.mu.Lock()
		got := len(h.d.queue)
		h.d.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond) // polling; the test's timeout is the safety net
	}
}
