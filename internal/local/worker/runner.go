// Package worker holds the thindist-worker processes (Pool) and the Runner
// that sends them the jobs they take, in front of the fork servers and exec.
//
// It runs ThinLTO backend jobs in thindist-worker processes
// (worker/ at the top of the repository): C++ programs linked against the
// clang libraries of one LLVM, each compiling many jobs one after another
// as the job's own clang would, without a process per job.
//
// A Pool owns worker processes: it checks a job's compiler (Check, once
// per compiler file), starts, supervises and recycles the workers. The
// Runner, a proc.Runner, sends a job to Workers (a Pool in this process,
// or the per-user server's, internal/local/workerserver) only when the job has
// only options the workers are tested with; anything else goes to the
// next runner (the fork server, exec). A worker that dies, hangs or passes
// its memory bound mid-job is discarded and the job rerun by exec, so a
// link never fails for the worker's sake. Every result says whether a
// worker compiled it, and if not, why not.
package worker

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/describe"
)

// Stats count what a Runner did.
type Stats struct {
	Jobs     int // compiled by a worker
	Others   int // given to the next runner
	Reruns   int // rerun by exec after their worker died, hung or grew
	Started  int // workers started for its jobs
	Recycled int // workers replaced after its jobs (MaxJobs or RecycleRSS)
}

type runner struct {
	workers     Workers
	next, rerun proc.Runner

	mu    sync.Mutex
	stats Stats
}

// Runner is a proc.Runner with Stats and Close.
type Runner interface {
	proc.Runner
	Stats() Stats
	// Close ends the idle workers; call it once no job runs.
	Close()
}

// NewRunner returns a Runner on a Pool of its own (see NewRunnerOn).
func NewRunner(next, rerun proc.Runner, opts Options) Runner {
	return NewRunnerOn(NewPool(opts), next, rerun)
}

// NewRunnerOn returns a Runner that runs on workers what they can take,
// the rest with next, and reruns with rerun (exec) a job whose worker
// failed. Its Close closes workers.
func NewRunnerOn(workers Workers, next, rerun proc.Runner) Runner {
	return &runner{workers: workers, next: next, rerun: rerun}
}

// Describe names the runner and wraps, in this order, the workers it
// sends jobs to, the runner of the jobs they do not take and the one that
// reruns a job whose worker failed (describe.Describer).
func (r *runner) Describe() describe.Node {
	return describe.Node{Name: "Worker", Wraps: []any{r.workers, r.next, r.rerun}}
}

func (r *runner) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	if why := refuse(c); why != "" {
		return r.elsewhere(ctx, r.next, c, why, &r.stats.Others)
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	dir := c.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	start := time.Now()
	o, err := r.workers.Run(ctx, dir, c.Argv, env)
	if err != nil {
		return nil, fmt.Errorf("%s stopped: %w", c.Argv[0], err)
	}
	r.mu.Lock()
	r.stats.Started += b2i(o.Started)
	r.stats.Recycled += b2i(o.Recycled)
	r.mu.Unlock()
	switch {
	case o.Rerun != "":
		return r.elsewhere(ctx, r.rerun, c, o.Rerun+"; rerun by exec", &r.stats.Reruns)
	case o.Elsewhere != "":
		return r.elsewhere(ctx, r.next, c, o.Elsewhere, &r.stats.Others)
	}
	r.mu.Lock()
	r.stats.Jobs++
	r.mu.Unlock()
	return &proc.Result{Exit: proc.Exit{ExitCode: o.Status}, Stdout: limit(o.Stdout), Stderr: limit(o.Stderr),
		CPU: o.CPU, MaxRSS: o.MaxRSS, Wall: time.Since(start), By: proc.ByWorker}, nil
}

// refuse says why c does not go to a worker whatever its compiler, "" if
// it may.
func refuse(c *proc.Cmd) string {
	if len(c.Argv) == 0 {
		return "an empty command"
	}
	if c.Stdout != nil || c.Nice > 0 || len(c.ExtraFiles) > 0 {
		return "a job whose output streams, that runs niced or that is given descriptors"
	}
	if a := untested(c.Argv); a != "" {
		return fmt.Sprintf("the worker is not tested with %s", a)
	}
	return ""
}

// elsewhere runs c with x and notes on its result why not on a worker.
func (r *runner) elsewhere(ctx context.Context, x proc.Runner, c *proc.Cmd, why string, count *int) (*proc.Result, error) {
	r.mu.Lock()
	*count++
	r.mu.Unlock()
	res, err := x.Run(ctx, c)
	if res != nil {
		res.NotWorker = why
	}
	return res, err
}

func (r *runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *runner) Close() { r.workers.Close() }

func limit(b []byte) []byte {
	var c proc.Capture
	c.Write(b)
	return c.Bytes()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
