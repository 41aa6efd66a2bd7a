package remote

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// closedPort is an address on this machine that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// dialCounting returns Options whose connections dial through dial,
// counting the dials and the retrier's pauses.
func dialCounting(target string, dial func(ctx context.Context, addr string) (net.Conn, error)) (Options, *atomic.Int64, *atomic.Int64) {
	var dials, pauses atomic.Int64
	return Options{
		Target: target, MaxAttempts: 3,
		dialer: func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, addr)
		},
		onBackoff: func(time.Duration) { pauses.Add(1) },
	}, &dials, &pauses
}

// TestDialRefusedNotRetried: a service whose host refuses the connection
// (nothing listens on the port) fails Dial on its first try, said so, and
// is unreachable (the link compiles locally); no retry is scheduled, where
// before the fix the first call was tried again with backoff for about
// five seconds (issue 48, item 8).
func TestDialRefusedNotRetried(t *testing.T) {
	addr := closedPort(t)
	var d net.Dialer
	o, dials, pauses := dialCounting("grpc://"+addr, func(ctx context.Context, a string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", a)
	})
	_, err := Dial(t.Context(), o)
	if err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
	if !Refused(err) || !Unreachable(err) {
		t.Errorf("Dial: %v; want a refused connection, unreachable", err)
	}
	if n := pauses.Load(); n != 0 {
		t.Errorf("%d retries scheduled after a refused connection, want none: %v", n, err)
	}
	if dials.Load() == 0 {
		t.Errorf("no dial made")
	}
	t.Logf("%d dials: %v", dials.Load(), err)
}

// TestDialTransientRetried: a first call that fails otherwise than by a
// refused connection (here the connection is reset as it is made: a
// frontend starting, a proxy between) is still tried again, with backoff.
func TestDialTransientRetried(t *testing.T) {
	o, dials, pauses := dialCounting("grpc://127.0.0.1:1", func(ctx context.Context, a string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNRESET}
	})
	o.RetryWindow = time.Minute
	_, err := Dial(t.Context(), o)
	if err == nil || Refused(err) || !Unreachable(err) {
		t.Fatalf("Dial: %v; want an unreachable service, not a refused connection", err)
	}
	if n := pauses.Load(); n != int64(o.MaxAttempts-1) {
		t.Errorf("%d retries after a reset connection, want %d", n, o.MaxAttempts-1)
	}
	t.Logf("%d dials: %v", dials.Load(), err)
}
