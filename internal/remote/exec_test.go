package remote_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestExecStall: an action whose worker died (the server keeps reporting
// it EXECUTING) is given up after the client's bound on that stage:
// --remote-exec-stall, or --remote-exec-timeout plus a grace period. It is
// not retried, and the executor stays usable for other actions.
func TestExecStall(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    remote.ExecOptions
		want string
	}{
		{"stall", remote.ExecOptions{ExecStall: 300 * time.Millisecond}, "300ms (--remote-exec-stall)"},
		{"timeout", remote.ExecOptions{Timeout: 200 * time.Millisecond, ExecGrace: 100 * time.Millisecond, ExecStall: time.Hour},
			"300ms (--remote-exec-timeout 200ms + 100ms grace)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := fake(t, reapitest.Options{ExecutingFor: -1})
			c := dial(t, addr, remote.Options{})
			ex := remote.NewExecutor(c, tc.o)
			// The stream drops once: the bound holds across WaitExecution.
			srv.InjectFault(reapitest.MethodExecute, reapitest.FaultDropExecuteStream, 1)
			start := time.Now()
			_, err := ex.RunCommand(t.Context(), []string{"/bin/true"})
			d := time.Since(start)
			if err == nil {
				t.Fatal("an action on a dead worker finished")
			}
			if !strings.Contains(err.Error(), "EXECUTING") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error names neither the stage nor the bound %q: %v", tc.want, err)
			}
			if d < 300*time.Millisecond || d > 5*time.Second {
				t.Errorf("given up after %v, want soon after 300ms", d)
			}
			if n := ex.Stats().ExecStalls; n != 1 {
				t.Errorf("%d stalls counted, want 1", n)
			}
			if st := srv.Stats(); st.ExecuteCalls != 1 || st.WaitExecutionCalls != 1 {
				t.Errorf("%d Execute and %d WaitExecution calls, want 1 each: a stall is not retried", st.ExecuteCalls, st.WaitExecutionCalls)
			}
			srv.SetExecutingFor(0)
			res, err := ex.RunCommand(t.Context(), []string{"/bin/true"})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("with a live worker: %v %+v", err, res)
			}
		})
	}
}

// TestExecStallNotForSlowQueue: the EXECUTING bound does not count the
// time an action waited in the queue.
func TestExecStallNotForSlowQueue(t *testing.T) {
	_, addr := fake(t, reapitest.Options{QueueFor: 600 * time.Millisecond, ExecutingFor: 200 * time.Millisecond})
	c := dial(t, addr, remote.Options{})
	ex := remote.NewExecutor(c, remote.ExecOptions{ExecStall: 500 * time.Millisecond, QueueTimeout: time.Minute})
	if res, err := ex.RunCommand(t.Context(), []string{"/bin/true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestNoWorkerUnavailableTripsBreaker: a server without a worker for the
// platform that answers Unavailable (Buildbarn during its scheduler's
// startup window) is retried for one action; when that action has used up
// its retries, the executor sends no further action and says to check
// --remote-platform.
func TestNoWorkerUnavailableTripsBreaker(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{Platform: map[string][]string{"OSFamily": {"Linux"}}})
	c := dial(t, addr, remote.Options{MaxAttempts: 3})
	ex := remote.NewExecutor(c, remote.ExecOptions{Platform: [][2]string{{"OSFamily", "Windows"}}})
	_, err := ex.RunCommand(t.Context(), []string{"/bin/true"})
	var p *remote.Permanent
	if !errors.As(err, &p) {
		t.Fatalf("not a run-wide failure: %v", err)
	}
	if !strings.Contains(err.Error(), "OSFamily=Windows") || !strings.Contains(err.Error(), "check --remote-platform") {
		t.Errorf("no platform hint: %v", err)
	}
	if n := srv.Stats().ExecuteCalls; n != 3 {
		t.Errorf("%d Execute calls, want the 3 attempts", n)
	}
	_, err2 := ex.RunCommand(t.Context(), []string{"/bin/true"})
	if err2 == nil || err2.Error() != err.Error() {
		t.Errorf("after the breaker tripped: %v", err2)
	}
	if n := srv.Stats().ExecuteCalls; n != 3 {
		t.Errorf("%d Execute calls: an action was sent after the breaker tripped", n)
	}
}

// TestExecStreamsOwnConnections: executions in flight beyond what one
// connection carries (a server or proxy that allows few concurrent
// streams per connection) neither wait inside thindist nor hold up other
// calls: they go out on connections of their own.
func TestExecStreamsOwnConnections(t *testing.T) {
	const limit, n = 2, 4
	srv, addr := fake(t, reapitest.Options{MaxConcurrentStreams: limit})
	c := dial(t, addr, remote.Options{ExecStreams: n, StreamsPerConn: limit})
	ex := remote.NewExecutor(c, remote.ExecOptions{})
	srv.StallNext(n) // every execution hangs until cancelled
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := ex.RunCommand(ctx, []string{"/bin/true"})
			done <- err
		}()
	}
	// All four reach the server although one connection carries two
	// streams (the test's timeout is the safety net).
	for srv.Stats().ExecuteCalls < n {
		time.Sleep(10 * time.Millisecond)
	}
	// Other calls still go through.
	if err := c.CheckCAS(t.Context()); err != nil {
		t.Errorf("a CAS call while every execution stream is open: %v", err)
	}
	cancel()
	for i := 0; i < n; i++ {
		<-done
	}
}

// TestExecPriority: an action's place in its run's order goes to the
// server as the execution's priority (lower first), as Buildbarn's
// scheduler orders an invocation's queued operations by it.
func TestExecPriority(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	ex := remote.NewExecutor(c, remote.ExecOptions{})
	as, outs := shellActions(t, 3, -1)
	for i, a := range as {
		if _, err := ex.Execute(t.Context(), executor.Job{Action: a, Out: outs[i], Rank: 10 * (i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.ExecutePriorities(); !slices.Equal(got, []int32{10, 20, 30}) {
		t.Errorf("priorities sent %v, want [10 20 30]", got)
	}
}

// TestExecReadsStreamToItsEnd: the executor lets an Execute stream go only
// once the server has ended it, not right after its finished operation,
// so no used execution shows as cancelled on the server (a real Buildbarn
// counted 2 to 4 of 41 so); and a server that holds the stream open after
// it does not hold the action (here for an hour, past the deadline given).
func TestExecReadsStreamToItsEnd(t *testing.T) {
	for _, c := range []struct {
		linger        time.Duration
		wantCancelled bool
	}{{50 * time.Millisecond, false}, {time.Hour, true}} {
		srv, addr := fake(t, reapitest.Options{LingerAfterDone: c.linger})
		cl := dial(t, addr, remote.Options{})
		ex := remote.NewExecutor(cl, remote.ExecOptions{})
		as, outs := shellActions(t, 4, -1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		for i, a := range as {
			if res, err := ex.Execute(ctx, executor.Job{Action: a, Out: outs[i]}); err != nil || res.Failed() {
				t.Fatalf("linger %v: %v %+v", c.linger, err, res)
			}
		}
		cancel()
		if got := srv.Stats().CancelledAfterDone; (got > 0) != c.wantCancelled || c.wantCancelled && got != int64(len(as)) {
			t.Errorf("linger %v: %d of %d streams cancelled after their finished operation", c.linger, got, len(as))
		}
	}
}

// TestAhead: an action whose upload Ahead began is executed without
// uploading or asking FindMissingBlobs again; one dropped before any
// Execute is counted unused and still executes later.
func TestAhead(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	ex := remote.NewExecutor(c, remote.ExecOptions{NoLookup: true})
	as, outs := shellActions(t, 2, -1)

	drop := ex.Ahead(t.Context(), executor.Job{Action: as[0]})
	deadline := time.Now().Add(10 * time.Second)
	for srv.Stats().BlobsUploaded == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The upload itself finishes in the background: Execute waits for it.
	res, err := ex.Execute(t.Context(), executor.Job{Action: as[0], Out: outs[0]})
	drop()
	if err != nil || res.Failed() {
		t.Fatalf("%v %+v", err, res)
	}
	st := srv.Stats()
	if st.FindMissingBlobsCalls != 1 {
		t.Errorf("%d FindMissingBlobs calls, want 1: Execute asked again", st.FindMissingBlobsCalls)
	}
	if got, _ := os.ReadFile(outs[0][0]); string(got) != "object of module 0" {
		t.Errorf("output %q", got)
	}

	ex.Ahead(t.Context(), executor.Job{Action: as[1]})()
	if res, err := ex.Execute(t.Context(), executor.Job{Action: as[1], Out: outs[1]}); err != nil || res.Failed() {
		t.Fatalf("after a dropped preparation: %v %+v", err, res)
	}
	if es := ex.Stats(); es.Ahead != 2 || es.AheadUnused != 1 || es.Executed != 2 {
		t.Errorf("stats %+v, want 2 begun ahead, 1 unused, 2 executed", es)
	}
}

// TestExecReportsExecuting: the executor tells the race of its action when
// it sends the action for execution (executor.Events.Queued) and when the
// server reports a worker has taken it (executor.Events.Executing), which
// the race's spare sees in the progress its Wait is given.
func TestExecReportsExecuting(t *testing.T) {
	_, addr := fake(t, reapitest.Options{})
	ex := remote.NewExecutor(dial(t, addr, remote.Options{}), remote.ExecOptions{})
	as, outs := shellActions(t, 1, -1)
	spare := &waitingSpare{stage: make(chan executor.Progress, 1)}
	res, err := executor.Race(ex, executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), spare).Execute(t.Context(), executor.Job{Action: as[0], Out: outs[0]})
	if err != nil || res.Failed() || res.Where != executor.Remote {
		t.Fatalf("%v %+v", err, res)
	}
	queued, executing := (<-spare.stage).Progress()
	if queued.IsZero() || executing.IsZero() || executing.Before(queued) {
		t.Fatalf("the race's spare saw the action sent at %v and taken by a worker at %v, want both, in that order", queued, executing)
	}
}

// waitingSpare passes on the primary's progress it is asked to Wait
// with, and grants nothing.
type waitingSpare struct{ stage chan executor.Progress }

func (s *waitingSpare) Wait(ctx context.Context, _ *action.Action, primary executor.Progress) (func(), error) {
	s.stage <- primary
	<-ctx.Done()
	return nil, ctx.Err()
}
