package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/cache"
)

// DownError is the error of every call made once the service has been
// found down mid-run (see health): the run goes on without it. It is
// cache.ErrUnavailable to a cache and run-wide (executor.RunWide) to an
// executor's fallback, and its cause was reported once, when found
// (executor.Announced) by Client.OnDown's report.
type DownError struct {
	Target string
	// Err is the failure that showed the service down.
	Err error
}

func (e *DownError) Error() string {
	return fmt.Sprintf("remote %s stopped answering (%v)", e.Target, e.Err)
}

// Is makes a DownError cache.ErrUnavailable.
func (e *DownError) Is(target error) bool { return target == cache.ErrUnavailable }

// RunWide implements executor.RunWide: no action of the run can use the
// service any more.
func (e *DownError) RunWide() {}

// Announced implements executor.Announced: Options.Down said it.
func (e *DownError) Announced() {}

// health is the service's state for a run, a circuit breaker that opens
// once and stays open: healthy until a call finds the service down, which
// is when
//   - a call's retries give up on codes.Unavailable or DeadlineExceeded
//     (retryWhile), or
//   - a call got no answer within its whole deadline (--remote-timeout:
//     a server stopped, a proxy that stopped relaying),
//
// and down from then on. Going down cancels every call in flight; each
// ends, as every later call does at once without reaching the network,
// with the one DownError. The client's interceptors (unary, stream) apply
// it to every call on its connections. It trips only once armed (Dial
// arms it once connected): a service down at the start is Dial's error.
type health struct {
	target string
	// ctx ends when the service is found down: the calls in flight are
	// made under it too.
	ctx    context.Context
	cancel context.CancelFunc
	armed  atomic.Bool
	down   atomic.Pointer[DownError]
	once   sync.Once
	// report, if set, is told once, when the service is found down
	// (Client.OnDown).
	report atomic.Pointer[func(error)]
}

func newHealth(target string) *health {
	ctx, cancel := context.WithCancel(context.Background())
	return &health{target: target, ctx: ctx, cancel: cancel}
}

// err is the DownError once the service is down, else nil.
func (h *health) err() error {
	if d := h.down.Load(); d != nil {
		return d
	}
	return nil
}

// trip records that cause showed the service down, if armed: it cancels
// the calls in flight and reports it, once. It returns h.err().
func (h *health) trip(cause error) error {
	if !h.armed.Load() {
		return h.err()
	}
	h.once.Do(func() {
		d := &DownError{Target: h.target, Err: cause}
		h.down.Store(d)
		h.cancel()
		if r := h.report.Load(); r != nil {
			(*r)(d)
		}
	})
	return h.err()
}

// downCode reports whether err, a call's final failure, says the service
// is not answering (as opposed to busy, or refusing this call).
func downCode(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// Unreachable reports whether err, Dial's, says that the service could
// not be reached (as opposed to one that answered but cannot serve).
func Unreachable(err error) bool {
	return downCode(err) || errors.Is(err, context.DeadlineExceeded)
}

// bind returns ctx, also ended when the service goes down, and its cancel.
func (h *health) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	context.AfterFunc(ctx, func() { stop() }) // leaves h.ctx once ctx ends
	return ctx, cancel
}

// observe is what a call begun at start that ended with err, under ctx,
// returns: the DownError once the service is down (whether the call was
// cut short by it or failed as it went), after tripping h if the call
// waited out its deadline without an answer.
func (h *health) observe(ctx context.Context, start time.Time, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if d := h.err(); d != nil {
		return d
	}
	if status.Code(err) == codes.DeadlineExceeded && waitedOut(ctx, start) {
		if d := h.trip(err); d != nil {
			return d
		}
	}
	return err
}

// waitedOut reports whether a call under ctx begun at start waited (about)
// as long as ctx's deadline allowed. The server, told the deadline, may
// end the call a moment before the client's own timer: a DeadlineExceeded
// that comes that late is the deadline's, not an error the server
// answered with.
func waitedOut(ctx context.Context, start time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Since(start) >= dl.Sub(start)*9/10
}

// unary is the client's unary interceptor.
func (h *health) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if d := h.err(); d != nil {
		return d
	}
	ctx, cancel := h.bind(ctx)
	defer cancel()
	start := time.Now()
	return h.observe(ctx, start, invoker(ctx, method, req, reply, cc, opts...))
}

// stream is the client's stream interceptor. The stream's context is
// bound until the caller's ends, as gRPC asks callers to end it.
func (h *health) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if d := h.err(); d != nil {
		return nil, d
	}
	ctx, cancel := h.bind(ctx)
	start := time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		cancel()
		return nil, h.observe(ctx, start, err)
	}
	return &watchedStream{ClientStream: s, h: h, ctx: ctx, start: start}, nil
}

// watchedStream reports a stream's failures as health.observe does.
type watchedStream struct {
	grpc.ClientStream
	h     *health
	ctx   context.Context
	start time.Time
}

func (s *watchedStream) RecvMsg(m any) error {
	return s.h.observe(s.ctx, s.start, s.ClientStream.RecvMsg(m))
}

func (s *watchedStream) SendMsg(m any) error {
	return s.h.observe(s.ctx, s.start, s.ClientStream.SendMsg(m))
}
