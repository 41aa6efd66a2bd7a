package reapisim

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestSimSlotsPriority: queued executions get a freed slot lowest priority
// value first, then first come first served; one that gives up leaves the
// queue.
func TestSimSlotsPriority(t *testing.T) {
	s := newSimSlots(1)
	if !s.acquire(t.Context(), 0) {
		t.Fatal("no free slot")
	}
	got := make(chan int32, 4)
	queue := func(ctx context.Context, p int32) {
		n := queued(s)
		go func() {
			if s.acquire(ctx, p) {
				got <- p
			}
		}()
		for queued(s) == n {
			time.Sleep(time.Millisecond)
		}
	}
	gone, cancel := context.WithCancel(t.Context())
	queue(t.Context(), 5)
	queue(t.Context(), 1)
	queue(gone, 0) // gives up before a slot frees
	queue(t.Context(), 3)
	queue(t.Context(), 1)
	cancel()
	for queued(s) != 4 {
		time.Sleep(time.Millisecond)
	}
	var order []int32
	for range 4 {
		s.release()
		order = append(order, <-got)
	}
	if want := []int32{1, 1, 3, 5}; !slices.Equal(order, want) {
		t.Errorf("slots went to priorities %v, want %v", order, want)
	}
}

// queued is how many executions wait for one of s's slots.
func queued(s *simSlots) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting.Len()
}
