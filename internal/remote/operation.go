package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
)

// run executes ex, following the operation stream, resuming it with
// WaitExecution when it drops, and retrying transient failures a bounded
// number of times. marks hears when a worker takes it; inputs uploaded
// again count in m.
func (e *Executor) run(ctx context.Context, m Meter, ex *reapi.Executable, marks executor.StageMarks) (resp *repb.ExecuteResponse, executing time.Time, err error) {
	op := &operation{e: e, ex: ex, marks: marks}
	var lastErr error
	unavailable := 0
	retries := e.c.retrier(e.c.opts.RetryWindow)
	attempts := 0
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if ok, err := retries.again(ctx); err != nil {
				return nil, time.Time{}, err
			} else if !ok {
				break
			}
			e.retries.Add(1)
		}
		if p := e.off.Load(); p != nil && op.name == "" {
			// Another action tripped the breaker (maybe while this one
			// waited to try again): do not send this one either.
			return nil, time.Time{}, p
		}
		attempts = attempt
		resp, expired, err := op.follow(ctx, retries)
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		if expired != repb.ExecutionStage_UNKNOWN && (err != nil || resp == nil) {
			return nil, time.Time{}, e.stageExpired(expired)
		}
		if err == nil && resp == nil {
			// The stream ended without a finished operation: resume it.
			lastErr = errors.New("the operation stream ended before the action finished")
			continue
		}
		if err == nil {
			err = status.FromProto(resp.GetStatus()).Err()
			if err == nil {
				return resp, op.executing, nil
			}
			if status.Code(err) == codes.DeadlineExceeded {
				return nil, time.Time{}, fmt.Errorf("the action timed out on the worker: %v", err)
			}
			op.name = "" // the operation is over: a retry executes anew
		}
		lastErr = err
		switch classify(err, op.name != "") {
		case reexecute:
			op.name = ""
		case reupload:
			if err := e.uploadAgain(ctx, m, ex); err != nil {
				return nil, time.Time{}, err
			}
			op.name = ""
		case unavailableBeforeTaken:
			unavailable++
		case transientFailure:
		case runWideFailure:
			// The server cannot run any of this run's actions (no worker
			// for the platform, no permission, no execution service):
			// the remaining actions do not try.
			p := &Permanent{Err: fmt.Errorf("remote execution: %w", err)}
			if status.Code(err) == codes.FailedPrecondition || mentionsPlatform(err) {
				p.Hint = fmt.Sprintf("the server has no worker for the platform properties [%s] thindist sent: check --remote-platform", e.platformString())
			}
			e.off.CompareAndSwap(nil, p)
			return nil, time.Time{}, p
		default:
			return nil, time.Time{}, fmt.Errorf("remote execution: %w", err)
		}
	}
	if d := e.c.Down(); d != nil {
		return nil, time.Time{}, d // the retries ended as the service went down
	}
	return nil, time.Time{}, e.exhausted(attempts, lastErr, unavailable)
}

// operation follows one remote execution across the streams about it:
// its name once the server took it, its stage and since when (the bounds
// on QUEUED and EXECUTING hold whatever the streams do), and when a
// worker took it.
type operation struct {
	e         *Executor
	ex        *reapi.Executable
	marks     executor.StageMarks
	name      string // "": not taken yet, or to execute anew
	stage     repb.ExecutionStage_Value
	since     time.Time
	executing time.Time
}

// follow sends the operation for execution (Execute) or resumes it
// (WaitExecution) and follows the stream to its end. resp is the finished
// operation's response, nil if the stream ended before; expired is the
// stage whose bound (stageBound) passed, cancelling the stream, or
// UNKNOWN. The server taking the action restarts retries' window.
//
// If ctx ends while a worker runs the action, and the executor finishes
// abandoned executions (ExecOptions.FinishAbandoned) of an action whose
// result the server stores, follow returns ctx's error at once but leaves
// the stream open until the action ends (or its EXECUTING bound passes,
// or the connection closes with the run): a server may cancel an
// execution nobody waits for, and then stores nothing.
func (op *operation) follow(ctx context.Context, retries *retrier) (resp *repb.ExecuteResponse, expired repb.ExecutionStage_Value, err error) {
	e := op.e
	// The stream is ended by cancel, not by ctx: when ctx ends, the
	// select below decides whether it goes on.
	sctx, cancel := context.WithCancel(context.WithoutCancel(e.c.withMD(ctx)))
	var stream grpc.ServerStreamingClient[longrunningpb.Operation]
	if op.name == "" {
		// The outputs come back in the response where the server
		// inlines them: no read after the execution.
		stream, err = e.c.exec().Execute(sctx, &repb.ExecuteRequest{
			InstanceName: e.c.opts.Instance, ActionDigest: op.ex.ActionDigest.Proto(),
			SkipCacheLookup: e.o.SkipCacheLookup, DigestFunction: repb.DigestFunction_SHA256,
			ExecutionPolicy: &repb.ExecutionPolicy{Priority: op.ex.Priority},
			InlineStdout:    true, InlineStderr: true, InlineOutputFiles: op.ex.Outputs,
		})
	} else {
		stream, err = e.c.exec().WaitExecution(sctx, &repb.WaitExecutionRequest{Name: op.name})
	}
	if err != nil {
		cancel()
		return nil, repb.ExecutionStage_UNKNOWN, err
	}
	var expiredStage atomic.Int32 // the stage whose bound passed, cancelling the stream
	var executing atomic.Bool     // a worker runs the action now
	var timer *time.Timer
	onStage := func(st repb.ExecutionStage_Value) {
		if st != op.stage {
			op.stage, op.since = st, time.Now()
			executing.Store(st == repb.ExecutionStage_EXECUTING)
			if st == repb.ExecutionStage_EXECUTING {
				op.executing = op.since
				op.marks.Executing()
			}
			if timer != nil {
				timer.Stop()
				timer = nil
			}
		}
		if timer != nil {
			return
		}
		if bound, _ := e.stageBound(st); bound > 0 {
			timer = time.AfterFunc(bound-time.Since(op.since), func() {
				expiredStage.Store(int32(st))
				cancel() // the server drops an operation nobody waits for
			})
		}
	}
	type followed struct {
		resp *repb.ExecuteResponse
		name string
		err  error
	}
	done := make(chan followed, 1)
	go func() {
		resp, name, err := follow(stream, onStage)
		if err == nil && resp != nil {
			drain(stream, cancel)
		}
		if timer != nil {
			timer.Stop()
		}
		cancel()
		done <- followed{resp, name, err}
	}()
	var f followed
	select {
	case f = <-done:
	case <-ctx.Done():
		if e.o.FinishAbandoned && !op.ex.Action.GetDoNotCache() && executing.Load() {
			// Left to run to its end: the goroutine above ends the stream.
			e.finishing.Add(1)
			return nil, repb.ExecutionStage_UNKNOWN, ctx.Err()
		}
		cancel()
		f = <-done
	}
	if f.name != "" {
		op.name = f.name
		retries.progress() // the server took the action: the retry window starts anew
	}
	return f.resp, repb.ExecutionStage_Value(expiredStage.Load()), f.err
}

// stageBound is the client's bound on how long an operation may stay in
// stage st (0: none), and what sets it, for messages.
func (e *Executor) stageBound(st repb.ExecutionStage_Value) (time.Duration, string) {
	switch st {
	case repb.ExecutionStage_QUEUED:
		return e.o.QueueTimeout, "--remote-queue-timeout"
	case repb.ExecutionStage_EXECUTING:
		if e.o.Timeout > 0 {
			g := e.o.ExecGrace
			if g <= 0 {
				g = DefaultExecGrace
			}
			return e.o.Timeout + g, fmt.Sprintf("--remote-exec-timeout %v + %v grace", e.o.Timeout, g)
		}
		return e.o.ExecStall, "--remote-exec-stall"
	}
	return 0, ""
}

// stageExpired is the error of an action given up because its operation
// stayed in stage st past the bound: a failure of this action, not of the
// service, so it is not retried and the other actions go on.
func (e *Executor) stageExpired(st repb.ExecutionStage_Value) error {
	bound, what := e.stageBound(st)
	if st == repb.ExecutionStage_QUEUED {
		e.queueTimeouts.Add(1)
		return fmt.Errorf("the action stayed queued on the server for more than %v (%s): no worker took it", bound, what)
	}
	e.execStalls.Add(1)
	return fmt.Errorf("the action stayed EXECUTING on the server for more than %v (%s) without finishing: "+
		"its worker has probably died, and the server has not noticed yet", bound, what)
}

// drainBound bounds how long drain waits for a stream's end.
const drainBound = 200 * time.Millisecond

// drain reads a stream whose finished operation has arrived to its end
// (the server's status), or cancels it after drainBound. Cancelled right
// after its last message, while the server's handler is still returning,
// the execution shows as cancelled on the server though its result is
// used: a real Buildbarn counted 2 to 4 of 41 Execute calls as Canceled.
func drain(stream grpc.ServerStreamingClient[longrunningpb.Operation], cancel context.CancelFunc) {
	t := time.AfterFunc(drainBound, cancel)
	defer t.Stop()
	for {
		if _, err := stream.Recv(); err != nil {
			return
		}
	}
}

// follow reads operations until one is done, passing each one's stage to
// onStage. It returns the response, or nil and no error if the stream
// ended cleanly first, and the operation's name as soon as it is known.
func follow(stream grpc.ServerStreamingClient[longrunningpb.Operation], onStage func(repb.ExecutionStage_Value)) (*repb.ExecuteResponse, string, error) {
	name := ""
	for {
		op, err := stream.Recv()
		if err == io.EOF {
			return nil, name, nil
		}
		if err != nil {
			return nil, name, err
		}
		if op.GetName() != "" {
			name = op.GetName()
		}
		var md repb.ExecuteOperationMetadata
		if op.GetMetadata() != nil && op.GetMetadata().UnmarshalTo(&md) == nil && md.Stage != repb.ExecutionStage_UNKNOWN {
			onStage(md.Stage)
		}
		if !op.GetDone() {
			continue
		}
		if e := op.GetError(); e != nil {
			return nil, name, status.FromProto(e).Err()
		}
		resp := &repb.ExecuteResponse{}
		if op.GetResponse() == nil {
			return nil, name, status.Error(codes.Internal, "a finished operation without a response")
		}
		if err := op.GetResponse().UnmarshalTo(resp); err != nil {
			return nil, name, status.Errorf(codes.Internal, "a finished operation with an unreadable response: %v", err)
		}
		return resp, name, nil
	}
}
