package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/atomicfile"
	"github.com/thindist/thindist/internal/digest"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/proc"
	"github.com/thindist/thindist/internal/reapi"
)

// ExecOptions configures the remote executor.
type ExecOptions struct {
	// Compiler is the compiler's path on the workers; "" keeps the local
	// path (workers with the same toolchain layout).
	Compiler string
	// Platform properties (OSFamily, container-image, Pool...).
	Platform [][2]string
	// Env is the fixed environment of every command.
	Env [][2]string
	// Timeout bounds one execution on a worker (0: the server's default).
	Timeout time.Duration
	// Files memoises input digests (shared with the cache key).
	Files *digest.Files
	// QueueTimeout gives up on an action whose operation stays QUEUED
	// (ExecuteOperationMetadata.stage) this long: no worker takes it,
	// e.g. because the only matching worker died and the server keeps
	// the action queued until its own timeout. 0: no bound.
	QueueTimeout time.Duration
	// ExecStall gives up on an action whose operation stays EXECUTING
	// this long when Timeout is 0. A worker that dies mid-action cannot
	// enforce Action.timeout, and the server goes on reporting the action
	// EXECUTING until it notices the worker is gone (Buildbarn: a minute
	// or more). 0: no bound.
	ExecStall time.Duration
	// ExecGrace is what the client adds to Timeout, when that is set, for
	// its own bound on the EXECUTING stage (instead of ExecStall): time
	// for the worker to fetch inputs, upload outputs and report. 0:
	// DefaultExecGrace.
	ExecGrace time.Duration
	// SkipCacheLookup makes the server execute even when its ActionCache
	// holds the executable action.
	SkipCacheLookup bool
	// NoLookup leaves out the executor's own GetActionResult of the
	// executable action, for a caller that has just looked the action up
	// under its own key and stores what is executed there (a remote
	// cache that clients may write): a cold action then costs one
	// ActionCache lookup, not two. Without it the executor looks up
	// first, as Bazel does, because servers such as Buildbarn never
	// consult their ActionCache in Execute.
	NoLookup bool
}

// ExecStats are what the remote executor did in a run.
type ExecStats struct {
	// Executed and ServerCacheHits count the results it collected: run
	// on a worker, or found in the server's ActionCache (by its own
	// lookup or the server's).
	Executed, ServerCacheHits int64
	// Retries counts executions sent again after a transient failure.
	Retries int64
	// QueueTimeouts and ExecStalls count the actions it gave up on while
	// QUEUED (QueueTimeout) or EXECUTING (ExecStall, Timeout+ExecGrace).
	QueueTimeouts, ExecStalls int64
	// Ahead counts the actions whose upload began during a cache's
	// lookup (Ahead), and AheadUnused those of them that were then not
	// executed here (a cache hit, a local run).
	Ahead, AheadUnused int64
}

// Executor runs actions on the service's workers.
type Executor struct {
	c        *Client
	o        ExecOptions
	platform *repb.Platform
	env      []*repb.Command_EnvironmentVariable
	// off is set by the first permanent failure: the circuit breaker.
	off atomic.Pointer[Permanent]

	executed, serverCacheHits, retries, queueTimeouts, execStalls atomic.Int64

	// prepared holds what Ahead began, by action, until Execute takes it.
	prepared           sync.Map // *action.Action → *preparation
	ahead, aheadUnused atomic.Int64
}

// Stats returns what e has done so far.
func (e *Executor) Stats() ExecStats {
	return ExecStats{
		Executed: e.executed.Load(), ServerCacheHits: e.serverCacheHits.Load(), Retries: e.retries.Load(),
		QueueTimeouts: e.queueTimeouts.Load(), ExecStalls: e.execStalls.Load(),
		Ahead: e.ahead.Load(), AheadUnused: e.aheadUnused.Load(),
	}
}

// DefaultExecGrace is ExecOptions.ExecGrace's default.
const DefaultExecGrace = 30 * time.Second

// NewExecutor returns a remote executor on c.
func NewExecutor(c *Client, o ExecOptions) *Executor {
	e := &Executor{c: c, o: o, platform: reapi.Platform(o.Platform)}
	for _, kv := range o.Env {
		e.env = append(e.env, &repb.Command_EnvironmentVariable{Name: kv[0], Value: kv[1]})
	}
	if o.Files == nil {
		e.o.Files = digest.NewFiles()
	}
	// The files its actions' inputs were digested from are the ones the
	// uploader then reads: it need not hash those again.
	c.CAS.UseDigests(e.o.Files)
	return e
}

// Execute implements executor.Executor.
func (e *Executor) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	return e.execute(ctx, j, false)
}

// SecondWorker returns an executor that runs each action as a second
// execution of a computation already running (executor.Hedge), with e's
// connection, counters and circuit breaker. Its actions are do_not_cache
// (reapi.ExecOptions.DoNotCache): the server runs each on a worker of its
// own instead of merging it with the first execution, and stores nothing
// under it; nothing is looked up for them either.
func (e *Executor) SecondWorker() executor.Executor { return secondWorker{e} }

type secondWorker struct{ e *Executor }

func (s secondWorker) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	return s.e.execute(ctx, j, true)
}

func (s secondWorker) String() string { return "RemoteExecution[second worker]" }

// String names the executor in a chain (executor.Describe).
func (e *Executor) String() string { return "RemoteExecution" }

func (e *Executor) execute(ctx context.Context, j executor.Job, second bool) (*executor.Result, error) {
	a, out := j.Action, j.Out
	start := time.Now()
	if p := e.off.Load(); p != nil {
		return nil, p
	}
	var prep *preparation
	if !second {
		prep = e.take(a)
		defer prep.release()
	}
	var ex *reapi.Executable
	if prep != nil {
		ex = prep.ex
	} else {
		var err error
		if ex, err = reapi.BuildExecutable(a, e.execOptions(j.Shard, second)); err != nil {
			return nil, fmt.Errorf("preparing the remote action: %w", err)
		}
	}
	ex.Priority = int32(min(a.Rank, math.MaxInt32))
	ctx = forAction(ctx, a.ID, ex.ActionDigest)
	// Look the executable action up first, as Bazel does: servers such
	// as Buildbarn never consult their ActionCache in Execute.
	if res, ok := e.lookup(ctx, a, ex, out, second); ok {
		res.Wall = time.Since(start)
		return res, nil
	}
	// The caches have just missed the action: its own messages and shard
	// are new, and go up unasked. Its files' upload may have begun with
	// the lookup (Ahead): this waits for what that claimed, and sends
	// again what it failed to.
	if err := e.c.CAS.EnsureNew(ctx, ex.Blobs, ex.Files); err != nil {
		return nil, fmt.Errorf("uploading inputs: %w", err)
	}
	uploaded := time.Now()
	j.Begin()
	j.Stage.Queued()
	resp, executing, err := e.run(ctx, ex, j.Stage)
	if err != nil {
		return nil, err
	}
	e.c.inlined(ctx, resp.GetResult())
	ran := time.Now()
	res, err := e.collect(ctx, a, ex, resp, out)
	end := time.Now()
	if err != nil {
		return nil, fmt.Errorf("remote result rejected: %w", err)
	}
	res.Wall = end.Sub(start)
	res.Steps = []executor.Step{{Name: "uploading inputs", Start: start, End: uploaded}}
	if executing.IsZero() {
		res.Steps = append(res.Steps, executor.Step{Name: "remote execution", Start: uploaded, End: ran})
	} else {
		// The server said when a worker took it.
		res.Steps = append(res.Steps, executor.Step{Name: "queued", Start: uploaded, End: executing},
			executor.Step{Name: "executing", Start: executing, End: ran})
	}
	res.Steps = append(res.Steps, executor.Step{Name: "downloading outputs", Start: ran, End: end})
	return res, nil
}

// lookup serves ex from the server's ActionCache if it holds a usable
// result for the executable action (checked like an executed one).
// Anything else is a miss.
func (e *Executor) lookup(ctx context.Context, a *action.Action, ex *reapi.Executable, out []string, second bool) (*executor.Result, bool) {
	if e.o.SkipCacheLookup || e.o.NoLookup || second {
		return nil, false
	}
	ar, err := NewStore(e.c).GetActionResult(ctx, ex.ActionDigest, ex.Outputs)
	if err != nil || ar.GetExitCode() != 0 {
		return nil, false
	}
	res, err := e.collect(ctx, a, ex, &repb.ExecuteResponse{Result: ar, CachedResult: true}, out)
	if err != nil || res.Failed() {
		return nil, false
	}
	return res, true
}

// run executes ex, following the operation stream, resuming it with
// WaitExecution when it drops, and retrying transient failures a bounded
// number of times. marks hears when a worker takes it.
func (e *Executor) run(ctx context.Context, ex *reapi.Executable, marks executor.StageMarks) (resp *repb.ExecuteResponse, executing time.Time, err error) {
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
			if err := e.uploadAgain(ctx, ex); err != nil {
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

// failure is what a failed Execute or WaitExecution means for the action
// (classify).
type failure int

const (
	actionFailure          failure = iota // this action failed: no retry
	reexecute                             // the server forgot the operation: execute again
	reupload                              // inputs went missing from the CAS: upload them again, execute again
	unavailableBeforeTaken                // the service was unavailable before it took the action: retry
	transientFailure                      // retry
	runWideFailure                        // no action of the run can succeed (Permanent)
)

// classify says what err, the failure of a call about an operation
// (resuming: a WaitExecution of one the server had taken), means.
func classify(err error, resuming bool) failure {
	switch code := status.Code(err); {
	case code == codes.NotFound && resuming:
		return reexecute
	case code == codes.FailedPrecondition && missingInputs(err):
		return reupload
	case code == codes.Unavailable && !resuming:
		return unavailableBeforeTaken
	case transient(err):
		return transientFailure
	case permanent(code):
		return runWideFailure
	}
	return actionFailure
}

// uploadAgain uploads ex's inputs anew, after the server said some went
// missing from its CAS (evicted).
func (e *Executor) uploadAgain(ctx context.Context, ex *reapi.Executable) error {
	for d := range ex.Blobs {
		e.c.CAS.Forget(d)
	}
	for d := range ex.Files {
		e.c.CAS.Forget(d)
	}
	if err := e.c.CAS.Ensure(ctx, ex.Blobs, ex.Files); err != nil {
		return fmt.Errorf("uploading inputs again: %w", err)
	}
	return nil
}

// exhausted is the error of an action whose retries ran out after
// attempts, the last failing with lastErr, unavailable of them with the
// service unavailable before it took the action.
func (e *Executor) exhausted(attempts int, lastErr error, unavailable int) error {
	msg := fmt.Sprintf("remote execution failed after %d attempts: %v", attempts, lastErr)
	if status.Code(lastErr) == codes.Unavailable || mentionsPlatform(lastErr) {
		// The service stayed unavailable, or has no worker for the
		// platform, for the whole retry window (Buildbarn answers
		// Unavailable "No workers exist for instance name prefix ...
		// platform ..." during its scheduler's
		// platformQueueWithNoWorkersTimeout after start): the other
		// actions would each wait as long, so none is sent any more.
		p := &Permanent{Err: errors.New(msg)}
		switch {
		case mentionsPlatform(lastErr):
			p.Hint = fmt.Sprintf("the server has no worker for the platform properties [%s] thindist sent: check --remote-platform", e.platformString())
		case unavailable > 0:
			p.Hint = fmt.Sprintf("the service stayed unavailable; a server without a worker matching the platform properties [%s] may answer so, "+
				"as Buildbarn does during its scheduler's platformQueueWithNoWorkersTimeout after start: check --remote-platform", e.platformString())
		}
		e.off.CompareAndSwap(nil, p)
		return e.off.Load() // the same error for every action, reported once
	}
	return errors.New(msg)
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
func (op *operation) follow(ctx context.Context, retries *retrier) (resp *repb.ExecuteResponse, expired repb.ExecutionStage_Value, err error) {
	e := op.e
	sctx, cancel := context.WithCancel(e.c.withMD(ctx))
	defer cancel()
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
	var expiredStage atomic.Int32 // the stage whose bound passed, cancelling the stream
	var timer *time.Timer
	onStage := func(st repb.ExecutionStage_Value) {
		if st != op.stage {
			op.stage, op.since = st, time.Now()
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
	if err == nil {
		var name string
		resp, name, err = follow(stream, onStage)
		if name != "" {
			op.name = name
			retries.progress() // the server took the action: the retry window starts anew
		}
		if err == nil && resp != nil {
			drain(stream, cancel)
		}
	}
	if timer != nil {
		timer.Stop()
	}
	cancel()
	return resp, repb.ExecutionStage_Value(expiredStage.Load()), err
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

// Permanent is a failure of remote execution that no retry, and no other
// action of the run, gets over: after one, the executor sends no more
// actions (a run-wide circuit breaker).
type Permanent struct {
	Err  error
	Hint string
}

func (p *Permanent) Error() string {
	if p.Hint == "" {
		return p.Err.Error()
	}
	return p.Err.Error() + "\n  (" + p.Hint + ")"
}
func (p *Permanent) Unwrap() error { return p.Err }

// RunWide marks a Permanent as holding for every action of the run
// (executor.RunWide).
func (p *Permanent) RunWide() {}

// permanent reports whether an Execute failure with code is about the
// server or the run's configuration rather than one action. Only
// FailedPrecondition without missing blobs reaches here.
func permanent(code codes.Code) bool {
	switch code {
	case codes.FailedPrecondition, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// missingInputs reports whether a FailedPrecondition error says that
// blobs are missing from the CAS: the REAPI puts a PreconditionFailure
// with violations of type MISSING in its details. Other
// FailedPreconditions (Buildbarn: "No workers exist for instance name
// prefix ... platform ...") are not about the inputs.
func missingInputs(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				if v.GetType() == "MISSING" {
					return true
				}
			}
		}
	}
	return false
}

func mentionsPlatform(err error) bool {
	m := strings.ToLower(status.Convert(err).Message())
	return strings.Contains(m, "no worker") || strings.Contains(m, "platform")
}

func (e *Executor) platformString() string {
	var s []string
	for _, p := range e.platform.GetProperties() {
		s = append(s, p.Name+"="+p.Value)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
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

// collect checks the result against the declared outputs and downloads
// them. Any deviation is an error: nothing undeclared is written.
func (e *Executor) collect(ctx context.Context, a *action.Action, ex *reapi.Executable, resp *repb.ExecuteResponse, out []string) (*executor.Result, error) {
	ar := resp.GetResult()
	if ar == nil {
		return nil, errors.New("the response holds no result")
	}
	if len(ar.OutputDirectories)+len(ar.OutputSymlinks)+len(ar.OutputFileSymlinks)+len(ar.OutputDirectorySymlinks) > 0 {
		return nil, errors.New("the result names directories or symlinks, which the action does not declare")
	}
	declared := map[string]int{}
	for i, p := range ex.Outputs {
		declared[p] = i
	}
	got := make([]*repb.OutputFile, len(ex.Outputs))
	for _, f := range ar.OutputFiles {
		if err := reapi.CheckOutputPath(f.Path); err != nil {
			return nil, err
		}
		i, ok := declared[f.Path]
		if !ok {
			return nil, fmt.Errorf("the result names %q, which the action does not declare", f.Path)
		}
		got[i] = f
	}
	res := &executor.Result{Where: executor.Remote, Exit: proc.Exit{ExitCode: int(ar.ExitCode)}}
	if resp.CachedResult {
		res.Where = executor.RemoteCache
		e.serverCacheHits.Add(1)
	} else {
		e.executed.Add(1)
	}
	md := ar.GetExecutionMetadata()
	if s, c := md.GetExecutionStartTimestamp(), md.GetExecutionCompletedTimestamp(); s != nil && c != nil {
		res.CPU = c.AsTime().Sub(s.AsTime())
	}
	// Read stderr, stdout and the outputs together: small ones in one
	// batch, as many round trips as the batch limit requires.
	var want []digest.Digest
	std := func(raw []byte, p *repb.Digest) (*digest.Digest, error) {
		if len(raw) > 0 || p == nil {
			return nil, nil
		}
		d, err := digest.FromProto(p)
		if err != nil {
			return nil, err
		}
		want = append(want, d)
		return &d, nil
	}
	stderrD, err := std(ar.StderrRaw, ar.StderrDigest)
	if err != nil {
		return nil, fmt.Errorf("stderr: %v", err)
	}
	stdoutD, err := std(ar.StdoutRaw, ar.StdoutDigest)
	if err != nil {
		return nil, fmt.Errorf("stdout: %v", err)
	}
	res.Stderr, res.Stdout = ar.StderrRaw, ar.StdoutRaw
	failed := ar.ExitCode != 0
	outD := make([]digest.Digest, len(got))
	if !failed {
		for i, f := range got {
			if f == nil {
				return nil, fmt.Errorf("the result lacks output %s (%s)", ex.Outputs[i], a.Outputs[i].Path)
			}
			d, err := digest.FromProto(f.Digest)
			if err != nil {
				return nil, fmt.Errorf("output %s: %v", f.Path, err)
			}
			outD[i] = d
			if f.Contents != nil && int64(len(f.Contents)) == d.Size {
				if digest.OfBytes(f.Contents) != d {
					return nil, fmt.Errorf("output %s: inlined contents do not match the digest", f.Path)
				}
				continue
			}
			want = append(want, d)
		}
	}
	blobs, err := e.c.ReadBlobs(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	if stderrD != nil {
		res.Stderr = blobs[*stderrD]
	}
	if stdoutD != nil {
		res.Stdout = blobs[*stdoutD]
	}
	if res.Failed() {
		return res, nil // Verified reports it; its outputs do not matter
	}
	for i, f := range got {
		d := outD[i]
		data, ok := blobs[d]
		if !ok {
			data = f.Contents
		}
		if err := writeFile(out[i], data); err != nil {
			return nil, err
		}
		e.c.CAS.MarkPresent(d)
		if i == 0 {
			// Checked here, from memory; if not well formed, Verified
			// reads the file and reports it.
			res.ObjectChecked = executor.CheckObjectBytes(data) == nil
		}
	}
	res.OutputDigests = outD // each verified above (inline) or by ReadBlobs
	return res, nil
}

func (e *Executor) stdio(ctx context.Context, raw []byte, p *repb.Digest) ([]byte, error) {
	if len(raw) > 0 || p == nil {
		return raw, nil
	}
	d, err := digest.FromProto(p)
	if err != nil {
		return nil, err
	}
	return e.c.ReadBytes(ctx, d)
}

// writeFile writes an output or a blob to dst, an executor's output path:
// a name private to the run until its caller renames it into place
// (executor.Executor), so it is written once, directly (a temporary file
// and a rename cost another file creation and rename per output). It
// replaces dst rather than write into it: dst may be a hard link into the
// local cache, placed by a cache hit that was then not used (its other
// outputs were missing), and writing through it would change the cached
// blob.
func writeFile(dst string, data []byte) error {
	err := atomicfile.WritePrivate(dst, data, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = atomicfile.WritePrivate(dst, data, 0o644)
		}
	}
	return err
}
