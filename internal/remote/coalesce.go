package remote

import (
	"context"
	"sync"
	"time"
)

// coalesceWindow is how long the first request of a batch waits for the
// requests of other actions in flight: a few hundred microseconds, next to
// a round trip of a millisecond or more, so that hundreds of actions
// starting together cost a few calls instead of one each.
const coalesceWindow = 300 * time.Microsecond

// coalescer runs the requests of concurrent callers together, as one call
// of run: a batch goes when its window has passed or when the next
// request does not fit. A caller that gives up does not cancel the batch,
// which others wait for too.
//
// A request that comes when none has for a window goes at once, alone, as
// its caller's call: when actions end one by one (a small link's do, each
// reading its outputs by itself), waiting would only delay it, and wake
// the process once more when the window passes, which can cost more CPU
// than the call itself. The first request of a burst goes alone so, and the others gather
// behind it as before.
type coalescer[Req, Resp any] struct {
	window time.Duration
	// fits reports whether next may join reqs (it always may join an
	// empty batch).
	fits func(reqs []Req, next Req) bool
	// run makes the call and returns one response per request, in order.
	run func(ctx context.Context, reqs []Req) []Resp

	mu  sync.Mutex
	cur *coalesced[Req, Resp]
	// last is when the last request came: one that comes a window
	// later goes alone.
	last time.Time
}

type coalesced[Req, Resp any] struct {
	reqs  []Req
	resps []Resp
	once  sync.Once
	done  chan struct{}
}

// do adds req to the current batch and waits for its response.
func (c *coalescer[Req, Resp]) do(ctx context.Context, req Req) (Resp, error) {
	c.mu.Lock()
	now := time.Now()
	alone := c.cur == nil && now.Sub(c.last) >= c.window
	c.last = now
	if alone {
		c.mu.Unlock()
		// The call is the batch's, as a batch's would be (run adds what
		// its calls carry to a bare context), but it ends if the caller
		// gives up: nobody else waits for it.
		runCtx, cancel := context.WithCancel(context.Background())
		stop := context.AfterFunc(ctx, cancel)
		resp := c.run(runCtx, []Req{req})[0]
		stop()
		cancel()
		if err := ctx.Err(); err != nil {
			var zero Resp
			return zero, err
		}
		return resp, nil
	}
	if b := c.cur; b != nil && !c.fits(b.reqs, req) {
		c.cur = nil
		go c.fire(b)
	}
	b := c.cur
	if b == nil {
		b = &coalesced[Req, Resp]{done: make(chan struct{})}
		c.cur = b
		time.AfterFunc(c.window, func() {
			c.mu.Lock()
			if c.cur == b {
				c.cur = nil
			}
			c.mu.Unlock()
			c.fire(b)
		})
	}
	i := len(b.reqs)
	b.reqs = append(b.reqs, req)
	c.mu.Unlock()
	select {
	case <-b.done:
		return b.resps[i], nil
	case <-ctx.Done():
		var zero Resp
		return zero, ctx.Err()
	}
}

// fire runs batch b once. Its calls carry no caller's context: they
// serve every caller of the batch, and are bounded by the client's own
// deadlines and retries.
func (c *coalescer[Req, Resp]) fire(b *coalesced[Req, Resp]) {
	b.once.Do(func() {
		c.mu.Lock()
		reqs := b.reqs // no request joins a batch once it is no longer current
		c.mu.Unlock()
		b.resps = c.run(context.Background(), reqs)
		close(b.done)
	})
}
