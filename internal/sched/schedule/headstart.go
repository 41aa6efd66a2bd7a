package schedule

import (
	"sync"
)

// headStart holds actions back until the ones ahead of them have begun
// their real work (executor.Events.Begun) or ended. The planner splits the head
// of the order into tiers (Planner.Plan): the actions of a tier start once
// every action of the tiers before it has begun, and the actions after the
// last tier once every tier's have. So the longest actions of a link
// prepare (hash, upload) a tier at a time, each tier while the one before
// it already runs, instead of all at once on this machine's few cores,
// where the longest would finish preparing no sooner than the shortest.
type headStart struct {
	ends []int // ends[k]: the index after tier k's last action

	mu      sync.Mutex
	pending []int           // per tier, its actions not yet begun
	ready   []chan struct{} // ready[k] is closed once tiers 0..k have all begun
	next    int             // the first tier not yet wholly begun
	open    chan struct{}   // closed: the first tier's wait
}

// newHeadStart returns the gate for n actions in tiers ending at ends
// (increasing, at most n; empty: no head start).
func newHeadStart(ends []int, n int) *headStart {
	h := &headStart{open: make(chan struct{})}
	close(h.open)
	prev := 0
	for _, e := range ends {
		e = min(e, n)
		if e <= prev {
			continue
		}
		h.ends = append(h.ends, e)
		h.pending = append(h.pending, e-prev)
		h.ready = append(h.ready, make(chan struct{}))
		prev = e
	}
	return h
}

// tier is the tier of action i; len(h.ends) for the actions after them.
func (h *headStart) tier(i int) int {
	for k, e := range h.ends {
		if i < e {
			return k
		}
	}
	return len(h.ends)
}

// wait returns a channel closed once action i may start.
func (h *headStart) wait(i int) <-chan struct{} {
	if t := h.tier(i); t > 0 {
		return h.ready[t-1]
	}
	return h.open
}

// counts reports whether action i's beginning is waited for.
func (h *headStart) counts(i int) bool { return h.tier(i) < len(h.ends) }

// begun returns the function that marks action i begun; it may be called
// more than once (a race's two sides, then its end).
func (h *headStart) begun(i int) func() {
	var once sync.Once
	t := h.tier(i)
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.pending[t]--
			for h.next < len(h.pending) && h.pending[h.next] == 0 {
				close(h.ready[h.next])
				h.next++
			}
		})
	}
}
