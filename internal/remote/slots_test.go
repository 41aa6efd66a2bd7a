package remote

import (
	"context"
	"testing"
	"time"
)

// TestSlotQueuePriority: a freed execution slot goes to an action sent
// alone (a large backend) before a group that waited longer; a waiter
// that gives up takes no slot.
func TestSlotQueuePriority(t *testing.T) {
	q := &slotQueue{free: 1}
	if !q.tryAcquire() || q.tryAcquire() {
		t.Fatal("one slot: the first tryAcquire takes it, the second finds none")
	}
	queued := func(prio, n int) {
		for {
			q.mu.Lock()
			k := len(q.wait[prio])
			q.mu.Unlock()
			if k == n {
				return
			}
			time.Sleep(time.Millisecond) // polling; the test's timeout is the safety net
		}
	}
	got := make(chan string, 3)
	gctx, cancelGone := context.WithCancel(t.Context())
	go func() {
		if q.acquire(gctx, groupPriority) != nil {
			got <- "gone"
		}
	}()
	queued(groupPriority, 1)
	go func() {
		if q.acquire(t.Context(), groupPriority) == nil {
			got <- "group"
		}
	}()
	queued(groupPriority, 2)
	go func() {
		if q.acquire(t.Context(), alonePriority) == nil {
			got <- "alone"
		}
	}()
	queued(alonePriority, 1)
	cancelGone()
	if w := <-got; w != "gone" {
		t.Fatalf("%s, want the cancelled waiter to give up first", w)
	}
	q.release()
	if w := <-got; w != "alone" {
		t.Errorf("the freed slot went to %s, want the action sent alone", w)
	}
	q.release()
	if w := <-got; w != "group" {
		t.Errorf("the next slot went to %s, want the group", w)
	}
	q.release()
	if !q.tryAcquire() {
		t.Errorf("every slot released, none free")
	}
}
