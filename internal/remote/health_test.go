package remote_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// told collects what a client's OnDown reports.
type told struct {
	mu   sync.Mutex
	errs []error
}

func (t *told) report(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

func (t *told) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.errs)
}

func totalRPCs(srv *reapitest.FakeServer) (n int64) {
	for _, c := range srv.Stats().RPCs {
		n += c
	}
	return n
}

// wantDown checks that err is the client's DownError: a cache's
// ErrUnavailable and an executor's run-wide, announced failure.
func wantDown(t *testing.T, what string, err error) {
	t.Helper()
	var d *remote.DownError
	var ann executor.Announced
	if !errors.As(err, &d) || !errors.Is(err, cache.ErrUnavailable) || !errors.As(err, &ann) {
		t.Errorf("%s: %v, want the service's DownError", what, err)
	}
}

// afterDown checks that, once the service is down, calls of every kind
// fail at once with the DownError without reaching the server.
func afterDown(t *testing.T, srv *reapitest.FakeServer, c *remote.Client, ex *remote.Executor) {
	t.Helper()
	before := totalRPCs(srv)
	ctx := t.Context()
	blob := []byte("after the trip")
	d := digest.OfBytes(blob)
	_, err := c.FindMissing(ctx, []digest.Digest{d})
	wantDown(t, "FindMissing", err)
	wantDown(t, "Ensure", c.CAS.Ensure(ctx, nil, map[digest.Digest][]byte{d: blob}, nil))
	_, err = c.ReadBytes(ctx, nil, d)
	wantDown(t, "ReadBytes", err)
	_, err = remote.NewStore(c).GetActionResult(ctx, nil, d, nil)
	wantDown(t, "GetActionResult", err)
	_, err = ex.RunCommand(ctx, []string{"/bin/true"})
	wantDown(t, "an execution", err)
	if n := totalRPCs(srv) - before; n != 0 {
		t.Errorf("%d calls reached the server after the service was found down", n)
	}
}

// TestServiceStopsAnswering: a server that stops answering mid-run (a
// stopped process, a proxy that stopped relaying) is found down by the
// first call that gets no answer within its deadline. Every call in
// flight is abandoned then (an execution, whose stream has no deadline of
// its own, is cancelled), the run is told once, and no later call reaches
// the server.
func TestServiceStopsAnswering(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{ExecutingFor: -1})
	c := dial(t, addr, remote.Options{RPCTimeout: time.Second})
	var down told
	c.OnDown(down.report)
	ex := remote.NewExecutor(c, remote.ExecOptions{ExecStall: time.Hour})

	running := make(chan error, 1)
	go func() {
		_, err := ex.RunCommand(t.Context(), []string{"/bin/true"})
		running <- err
	}()
	for srv.Stats().ExecuteCalls == 0 {
		select {
		case err := <-running:
			t.Fatalf("the execution ended before the server stopped answering: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	srv.HangAfter(0)
	_, err := c.FindMissing(t.Context(), []digest.Digest{digest.OfBytes([]byte("x"))})
	wantDown(t, "the call that found it down", err)
	select {
	case err := <-running:
		wantDown(t, "the execution in flight", err)
	case <-time.After(time.Minute): // a guard, not a measure: it would wait an hour
		t.Fatal("the execution in flight was not abandoned")
	}
	// The server hears of the cancelled stream a moment later.
	for srv.Stats().Cancellations == 0 {
		select {
		case <-t.Context().Done():
			t.Fatal("the server never heard that the execution was cancelled")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := srv.Stats(); st.Cancellations != 1 {
		t.Errorf("%d executions cancelled, want 1; %d calls hung: %v", st.Cancellations, st.Hung, st.RPCs)
	}
	afterDown(t, srv, c, ex)
	if n := down.count(); n != 1 {
		t.Errorf("told %d times that the service is down, want once", n)
	}
}

// TestServiceDies: a server that dies mid-run (connections reset, then
// refused) is retried for the retry window only, then found down; when it
// is back, nothing of the run reaches it any more.
func TestServiceDies(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{RPCTimeout: time.Second})
	var down told
	c.OnDown(down.report)
	ex := remote.NewExecutor(c, remote.ExecOptions{})
	find := func(ctx context.Context) error {
		_, err := c.FindMissing(ctx, []digest.Digest{digest.OfBytes([]byte("x"))})
		return err
	}
	if err := find(t.Context()); err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() { back <- srv.Bounce(5 * time.Second) }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard, not a measure
	defer cancel()
	for {
		err := find(ctx)
		if errors.Is(err, cache.ErrUnavailable) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the dead service was not given up: %v", err)
		}
		if err == nil {
			select {
			case <-back:
				t.Fatal("the service came back before it was found down")
			default:
			}
		}
	}
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	afterDown(t, srv, c, ex)
	if n := down.count(); n != 1 {
		t.Errorf("told %d times that the service is down, want once", n)
	}
}
