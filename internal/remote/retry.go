package remote

import (
	"context"
	"math/rand/v2"
	"time"
)

// retrier is the one retry policy of the remote client, for unary calls
// (Client.retry) and for executions (Executor.run) alike: at most
// attempts tries, none started more than window after the first failure
// since the last progress, and an exponential backoff with jitter between
// them.
type retrier struct {
	attempts int
	window   time.Duration
	// down ends the wait once the service is found down (health).
	down <-chan struct{}
	// onBackoff, if set, is told each pause (Options.onBackoff).
	onBackoff func(time.Duration)
	failures  int       // since the start: progress does not reset them
	since     time.Time // the first failure since the last progress
}

// retrier returns a fresh policy whose window is window.
func (c *Client) retrier(window time.Duration) *retrier {
	return &retrier{attempts: c.opts.MaxAttempts, window: window, down: c.health.ctx.Done(), onBackoff: c.opts.onBackoff}
}

// again records a failure and, if the bounds allow another try, waits the
// backoff and returns true. It returns ctx's error if ctx ends while it
// waits, and false if the service is found down meanwhile.
func (r *retrier) again(ctx context.Context) (bool, error) {
	r.failures++
	if r.since.IsZero() {
		r.since = time.Now()
	}
	d := backoff(r.failures)
	if r.failures >= r.attempts || time.Since(r.since)+d > r.window {
		return false, nil
	}
	if r.onBackoff != nil {
		r.onBackoff(d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-r.down:
		return false, nil
	}
}

// progress restarts the window: the server took the work (an execution
// was accepted), so earlier failures say nothing of the next ones.
func (r *retrier) progress() { r.since = time.Time{} }

// backoff is the pause after the n-th failure: 200ms doubling up to 5s,
// with jitter (the default 10 attempts span 13-26s).
func backoff(n int) time.Duration {
	d := 200 * time.Millisecond << min(n-1, 6)
	d = min(d, 5*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// retry calls f with the headers and a per-call deadline until it
// succeeds, fails with an error that is not transient, or the retrier of
// window gives up. A call that gives up on codes.Unavailable or
// DeadlineExceeded finds the service down (health): it and every call
// after it return the DownError.
func (c *Client) retry(ctx context.Context, f func(ctx context.Context) error) error {
	return c.retryWhile(ctx, c.opts.RetryWindow, transient, f)
}

// retryWhile is retry with its own window and test of which errors are
// worth another try (a corrupt read is, besides the transient ones).
func (c *Client) retryWhile(ctx context.Context, window time.Duration, retryable func(error) bool, f func(ctx context.Context) error) error {
	r := c.retrier(window)
	for {
		cctx, cancel := context.WithTimeout(c.withMD(ctx), c.opts.RPCTimeout)
		err := f(cctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil || !retryable(err) {
			return err
		}
		if ok, werr := r.again(ctx); werr != nil {
			return werr
		} else if !ok {
			if d := c.health.err(); d != nil {
				return d
			}
			if downCode(err) {
				if d := c.health.trip(err); d != nil {
					return d
				}
			}
			return err
		}
	}
}
