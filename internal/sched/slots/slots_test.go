package slots

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestPoolPriority: a freed slot goes to a waiter of a lower priority
// value before one that waited longer at a higher value; a waiter that
// gives up takes no slot.
func TestPoolPriority(t *testing.T) {
	const first, second = 0, 1
	p := NewPool(1)
	if !p.TryAcquire() || p.TryAcquire() {
		t.Fatal("one slot: the first TryAcquire takes it, the second finds none")
	}
	queued := func(prio, n int) {
		for p.Waiting(prio) != n {
			time.Sleep(time.Millisecond) // polling; the test's timeout is the safety net
		}
	}
	got := make(chan string, 3)
	gctx, cancelGone := context.WithCancel(t.Context())
	go func() {
		if p.Acquire(gctx, second) != nil {
			got <- "gone"
		}
	}()
	queued(second, 1)
	go func() {
		if p.Acquire(t.Context(), second) == nil {
			got <- "later"
		}
	}()
	queued(second, 2)
	go func() {
		if p.Acquire(t.Context(), first) == nil {
			got <- "first"
		}
	}()
	queued(first, 1)
	cancelGone()
	if w := <-got; w != "gone" {
		t.Fatalf("%s, want the cancelled waiter to give up first", w)
	}
	p.Release()
	if w := <-got; w != "first" {
		t.Errorf("the freed slot went to %s, want the waiter of the lower priority value", w)
	}
	p.Release()
	if w := <-got; w != "later" {
		t.Errorf("the next slot went to %s, want the other", w)
	}
	p.Release()
	if !p.TryAcquire() {
		t.Errorf("every slot released, none free")
	}
}

// TestWaitHandsBackLateGrant: a waiter whose context ends after it was
// granted, but before it saw the grant, hands the grant back; one still
// queued is taken out of the queue and gets nothing.
func TestWaitHandsBackLateGrant(t *testing.T) {
	var mu sync.Mutex
	var q Queue[*poolWaiter]
	granted, queued := &poolWaiter{NewWaiter(1)}, &poolWaiter{NewWaiter(2)}
	q.Add(queued)
	q.Add(granted)
	if q[0] != granted {
		t.Fatal("the waiter of rank 1 is not first")
	}
	q.Grant(0, 7)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var back []int
	// Both ready: select may take either; run until the late path is
	// seen, as it is at least half the time.
	for tries := 0; len(back) == 0 && tries < 1000; tries++ {
		g, err := Wait(ctx, &mu, &q, granted, func(g int) { back = append(back, g) })
		if err == nil {
			if g != 7 {
				t.Fatalf("granted %d, want 7", g)
			}
			q.Add(granted)
			q.Grant(0, 7) // rank 1: first
		}
	}
	if len(back) != 1 || back[0] != 7 {
		t.Errorf("handed back %v, want the grant 7 once", back)
	}
	if _, err := Wait(ctx, &mu, &q, queued, func(int) { t.Error("a waiter never granted handed a grant back") }); err == nil {
		t.Error("a cancelled waiter still queued got a grant")
	}
	if len(q) != 0 {
		t.Errorf("%d waiters left in the queue, want none", len(q))
	}
}

// TestQueueOrder: waiters are queued by rank, and in arrival order within
// a rank.
func TestQueueOrder(t *testing.T) {
	var q Queue[*poolWaiter]
	a, b, c, d := &poolWaiter{NewWaiter(2)}, &poolWaiter{NewWaiter(1)}, &poolWaiter{NewWaiter(2)}, &poolWaiter{NewWaiter(0)}
	for _, w := range []*poolWaiter{a, b, c, d} {
		q.Add(w)
	}
	want := []*poolWaiter{d, b, a, c}
	for i := range want {
		if q[i] != want[i] {
			t.Fatalf("position %d holds the waiter of rank %d; want ranks 0, 1, 2, 2 in arrival order", i, q[i].Rank)
		}
	}
}
