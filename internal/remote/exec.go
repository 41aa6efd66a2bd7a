package remote

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/describe"
	"github.com/thindist/thindist/internal/sys/digest"
)

// ExecOptions configures the remote executor.
type ExecOptions struct {
	// Compiler is the compiler's path on the workers; "" keeps the local
	// path (workers with the same toolchain layout).
	Compiler string
	// Toolchain, if set, returns the toolchain to ship with the actions
	// of a compiler (reapi.ExecOptions.Toolchain), nil to use Compiler.
	Toolchain func(compiler string) *reapi.Shipped
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
	// FinishAbandoned keeps following an execution whose caller gives up
	// on it while a worker runs it (a race won here), until it ends, so
	// that the server stores its result in its ActionCache for later
	// links, instead of cancelling it: for a service whose ActionCache
	// this run does not write (the result won here is not stored there).
	// The run does not wait for it: it ends with the connection
	// (docs/design.md, "Racing local and remote").
	FinishAbandoned bool
	// OnFirst, if set, is called once, with the executor and the first
	// action sent for execution, before its upload (a link's check of the
	// workers' compiler, CompilerCheck.Start, which a link whose every
	// action is cached skips).
	OnFirst func(*Executor, *action.Action)
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
	// Finishing counts the executions given up on while a worker ran
	// them and left to run to their end (ExecOptions.FinishAbandoned).
	Finishing int64
}

// Executor runs actions on the service's workers.
type Executor struct {
	c        *Client
	tc       toolchains // the shipped toolchains made present
	o        ExecOptions
	platform *repb.Platform
	env      []*repb.Command_EnvironmentVariable
	first    sync.Once // OnFirst
	// off is set by the first permanent failure: the circuit breaker.
	off atomic.Pointer[Permanent]

	executed, serverCacheHits, retries, queueTimeouts, execStalls, finishing atomic.Int64

	// prepared holds what Ahead began, by action, until Execute takes it.
	prepared           sync.Map // *action.Action → *preparation
	ahead, aheadUnused atomic.Int64
}

// Stats returns what e has done so far.
func (e *Executor) Stats() ExecStats {
	return ExecStats{
		Executed: e.executed.Load(), ServerCacheHits: e.serverCacheHits.Load(), Retries: e.retries.Load(),
		QueueTimeouts: e.queueTimeouts.Load(), ExecStalls: e.execStalls.Load(),
		Ahead: e.ahead.Load(), AheadUnused: e.aheadUnused.Load(), Finishing: e.finishing.Load(),
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

// Describe names the executor in a chain, with its note (describe.Describer).
func (s secondWorker) Describe() describe.Node {
	return describe.Node{Name: "RemoteExecution", Notes: []string{"second worker"}}
}

func (s secondWorker) String() string { return describe.Line(s) }

// Describe names the executor in a chain (describe.Describer).
func (e *Executor) Describe() describe.Node { return describe.Node{Name: "RemoteExecution"} }

func (e *Executor) String() string { return describe.Line(e) }

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
	ex.Priority = int32(min(j.Rank, math.MaxInt32))
	ctx = forAction(ctx, a.ID, ex.ActionDigest)
	// Look the executable action up first, as Bazel does: servers such
	// as Buildbarn never consult their ActionCache in Execute.
	if res, ok := e.lookup(ctx, j.Meter, a, ex, out, second); ok {
		res.Wall = time.Since(start)
		return res, nil
	}
	if e.o.OnFirst != nil && !second {
		e.first.Do(func() { e.o.OnFirst(e, a) })
	}
	// The caches have just missed the action: its own messages and shard
	// are new, and go up unasked. Its files' upload may have begun with
	// the lookup (Ahead): this waits for what that claimed, and sends
	// again what it failed to.
	if err := e.shipToolchain(ctx, j.Meter, ex); err != nil {
		return nil, fmt.Errorf("uploading the compiler's toolchain: %w", err)
	}
	if err := e.c.CAS.EnsureNew(ctx, j.Meter, ex.Blobs, ex.Files); err != nil {
		return nil, fmt.Errorf("uploading inputs: %w", err)
	}
	uploaded := time.Now()
	ev := j.Notify()
	ev.Begun()
	ev.Queued()
	resp, executing, err := e.run(ctx, j.Meter, ex, ev)
	if err != nil {
		return nil, err
	}
	e.c.inlined(j.Meter, resp.GetResult())
	ran := time.Now()
	res, err := e.collect(ctx, j.Meter, a, ex, resp, out)
	end := time.Now()
	if err != nil {
		return nil, fmt.Errorf("remote result rejected: %w", err)
	}
	res.Wall = end.Sub(start)
	res.Steps = []executor.Step{{Kind: executor.StepUploadingInputs, Start: start, End: uploaded}}
	if executing.IsZero() {
		res.Steps = append(res.Steps, executor.Step{Kind: executor.StepRemoteExecution, Start: uploaded, End: ran})
	} else {
		// The server said when a worker took it.
		res.Steps = append(res.Steps, executor.Step{Kind: executor.StepQueued, Start: uploaded, End: executing},
			executor.Step{Kind: executor.StepExecuting, Start: executing, End: ran})
	}
	res.Steps = append(res.Steps, executor.Step{Kind: executor.StepDownloadingOutputs, Start: ran, End: end})
	return res, nil
}

// lookup serves ex from the server's ActionCache if it holds a usable
// result for the executable action (checked like an executed one).
// Anything else is a miss. What it reads counts in m.
func (e *Executor) lookup(ctx context.Context, m Meter, a *action.Action, ex *reapi.Executable, out []string, second bool) (*executor.Result, bool) {
	if e.o.SkipCacheLookup || e.o.NoLookup || second {
		return nil, false
	}
	ar, err := NewStore(e.c).GetActionResult(ctx, m, ex.ActionDigest, ex.Outputs)
	if err != nil || ar.GetExitCode() != 0 {
		return nil, false
	}
	res, err := e.collect(ctx, m, a, ex, &repb.ExecuteResponse{Result: ar, CachedResult: true}, out)
	if err != nil || res.Failed() {
		return nil, false
	}
	return res, true
}
