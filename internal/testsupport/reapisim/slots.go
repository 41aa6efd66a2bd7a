package reapisim

import (
	"container/heap"
	"context"
	"sync"
)

// simSlots are a simulated cluster's worker slots. Queued executions get a
// free slot in the order of their ExecutionPolicy priority (lower first),
// then of their arrival, as Buildbarn's scheduler hands out an
// invocation's queued operations.
type simSlots struct {
	mu      sync.Mutex
	free    int
	size    int
	waiting slotHeap
	arrived int64
}

func newSimSlots(n int) *simSlots { return &simSlots{free: n, size: n} }

type slotWaiter struct {
	priority int32
	seq      int64
	granted  chan struct{}
	index    int
}

type slotHeap []*slotWaiter

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority < h[j].priority
	}
	return h[i].seq < h[j].seq
}
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *slotHeap) Push(x any) { w := x.(*slotWaiter); w.index = len(*h); *h = append(*h, w) }
func (h *slotHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// acquire waits for a slot; false if ctx ended first.
func (s *simSlots) acquire(ctx context.Context, priority int32) bool {
	s.mu.Lock()
	s.arrived++
	if s.free > 0 && s.waiting.Len() == 0 {
		s.free--
		s.mu.Unlock()
		return true
	}
	w := &slotWaiter{priority: priority, seq: s.arrived, granted: make(chan struct{})}
	heap.Push(&s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.granted:
		return true
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&s.waiting, w.index)
		return false
	}
	// Granted meanwhile: give it back.
	s.releaseLocked()
	return false
}

func (s *simSlots) release() {
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

func (s *simSlots) releaseLocked() {
	if s.waiting.Len() > 0 {
		close(heap.Pop(&s.waiting).(*slotWaiter).granted)
		return
	}
	s.free++
}
