package remote

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// doubling is a coalescer whose answer to r is 2r, whose batches hold up
// to 100, and that counts its calls and the requests they carried.
func doubling(window time.Duration, calls, sent *atomic.Int64) *coalescer[int, int] {
	return &coalescer[int, int]{
		window: window,
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
}

// TestCoalescer: concurrent requests go out as one call and each caller
// gets its own answer; a request that does not fit sends the batch off and
// starts the next; a caller that gives up gets its context's error. The
// window is an hour, so only a request that does not fit sends a batch:
// nothing depends on timing. The coalescer has just seen a request, so
// the first of these does not go alone.
func TestCoalescer(t *testing.T) {
	var calls, sent atomic.Int64
	c := doubling(time.Hour, &calls, &sent)
	c.last = time.Now()
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

// TestCoalescerAlone: a request that comes when none has for a window goes
// at once, alone, though the window is an hour; one that comes within the
// window of the last joins a batch, and waits for it.
func TestCoalescerAlone(t *testing.T) {
	var calls, sent atomic.Int64
	c := doubling(time.Hour, &calls, &sent)
	lone := make(chan int)
	go func() {
		got, _ := c.do(t.Context(), 7)
		lone <- got
	}()
	select {
	case got := <-lone:
		if got != 14 {
			t.Fatalf("a lone request got %d", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lone request waited for the window")
	}
	if calls.Load() != 1 || sent.Load() != 1 {
		t.Fatalf("%d calls carrying %d requests, want the lone one", calls.Load(), sent.Load())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := c.do(ctx, 3)
		done <- err
	}()
	for {
		c.mu.Lock()
		joined := c.cur != nil && len(c.cur.reqs) == 1
		c.mu.Unlock()
		if joined {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("a request just after another did not wait in a batch: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("a caller that gave up got %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls, want the batch not sent", calls.Load())
	}
	// A lone caller whose context has ended gets its error.
	c.last = time.Time{}
	c.cur = nil
	ended, stop := context.WithCancel(t.Context())
	stop()
	if _, err := c.do(ended, 1); err != context.Canceled {
		t.Errorf("a lone caller whose context had ended got %v", err)
	}
}
