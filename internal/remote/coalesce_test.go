package remote

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCoalescer: concurrent requests go out as one call and each caller
// gets its own answer; a request that does not fit sends the batch off and
// starts the next; a caller that gives up gets its context's error. The
// window is an hour, so only a request that does not fit sends a batch:
// nothing depends on timing.
func TestCoalescer(t *testing.T) {
	var calls, sent atomic.Int64
	c := &coalescer[int, int]{
		window: time.Hour,
		fits: func(reqs []int, next int) bool {
			n := next
			for _, r := range reqs {
				n += r
			}
			return n <= 100
		},
		run: func(_ context.Context, reqs []int) []int {
			calls.Add(1)
			sent.Add(int64(len(reqs)))
			out := make([]int, len(reqs))
			for i, r := range reqs {
				out[i] = r * 2
			}
			return out
		},
	}
	var wg sync.WaitGroup
	for i := 1; i <= 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.do(t.Context(), i)
			if err != nil || got != 2*i {
				t.Errorf("request %d: %d %v", i, got, err)
			}
		}()
	}
	// Wait until all ten have joined the batch (1+...+10 = 55 fits).
	for {
		c.mu.Lock()
		n := 0
		if c.cur != nil {
			n = len(c.cur.reqs)
		}
		c.mu.Unlock()
		if n == 10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// 50 does not fit beside 55: the batch of ten goes now; this one waits
	// in the next batch, whose window never passes, until it gives up.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := c.do(ctx, 50)
		done <- err
	}()
	wg.Wait()
	if calls.Load() != 1 || sent.Load() != 10 {
		t.Errorf("%d calls carrying %d requests, want the ten in one call", calls.Load(), sent.Load())
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("a caller that gave up got %v", err)
	}
}
