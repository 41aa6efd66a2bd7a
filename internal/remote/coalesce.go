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
type coalescer[Req, Resp any] struct {
	window time.Duration
	// fits reports whether next may join reqs (it always may join an
	// empty batch).
	fits func(reqs []Req, next Req) bool
	// run makes the call and returns one response per request, in order.
	run func(ctx context.Context, reqs []Req) []Resp

	mu  sync.Mutex
	cur *coalesced[Req, Resp]
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
