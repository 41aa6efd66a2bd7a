// Package worker runs ThinLTO backend jobs in thindist-worker processes
// (worker/ at the top of the repository): C++ programs linked against the
// clang libraries of one LLVM, each compiling many jobs one after another
// as the job's own clang would, without a process per job.
//
// NewRunner returns the proc.Runner that sends a job to a worker only when
// the worker can stand in for the job's compiler (Check, once per compiler)
// and the job has only options the worker is tested with; anything else
// goes to the next runner (the fork server, exec). A worker that dies, hangs
// or passes its memory bound mid-job is discarded and the job rerun by exec,
// so a link never fails for the worker's sake. Every result says whether a
// worker compiled it, and if not, why not.
package worker

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/proc"
)

// Options configure a Runner.
type Options struct {
	// Path is the thindist-worker executable.
	Path string
	// MaxJobs: a worker is replaced after that many jobs; 0 means 500.
	MaxJobs int
	// RecycleRSS: a worker whose peak RSS passed it after a job is
	// replaced; 0 means 2 GiB.
	RecycleRSS int64
	// MemLimit: a worker whose RSS passes it during a job is killed and the
	// job rerun by exec; 0 means 8 GiB.
	MemLimit int64
	// Timeout: a job still running after it is deemed hung, its worker
	// killed and the job rerun by exec; 0 means 30 minutes.
	Timeout time.Duration
}

// Stats count what a Runner did.
type Stats struct {
	Jobs     int // compiled by a worker
	Others   int // given to the next runner
	Reruns   int // rerun by exec after their worker died, hung or grew
	Started  int // workers started
	Recycled int // workers replaced after MaxJobs or RecycleRSS
}

type runner struct {
	next, rerun proc.Runner
	opts        Options

	mu        sync.Mutex
	idle      []*process
	compilers map[string]*check
	broken    string // why no worker can be started, once one could not
	stats     Stats
}

type check struct {
	once sync.Once
	why  string
}

// Runner is a proc.Runner with Stats and Close.
type Runner interface {
	proc.Runner
	Stats() Stats
	// Close ends the idle workers; call it once no job runs.
	Close()
}

// NewRunner returns a Runner that runs what a worker can take there, the
// rest with next, and reruns with rerun (exec) a job whose worker failed.
func NewRunner(next, rerun proc.Runner, opts Options) Runner {
	if opts.MaxJobs == 0 {
		opts.MaxJobs = 500
	}
	if opts.RecycleRSS == 0 {
		opts.RecycleRSS = 2 << 30
	}
	if opts.MemLimit == 0 {
		opts.MemLimit = 8 << 30
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Minute
	}
	return &runner{next: next, rerun: rerun, opts: opts, compilers: map[string]*check{}}
}

func (r *runner) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	dir := c.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if why := r.refuse(ctx, c, dir, env); why != "" {
		return r.elsewhere(ctx, r.next, c, why, &r.stats.Others)
	}
	w, err := r.get()
	if err != nil {
		return r.elsewhere(ctx, r.next, c, err.Error(), &r.stats.Others)
	}
	start := time.Now()
	a, why, err := r.runOn(ctx, w, dir, c.Argv, env)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s stopped: %w", c.Argv[0], err)
	case why != "":
		return r.elsewhere(ctx, r.rerun, c, why+"; rerun by exec", &r.stats.Reruns)
	case a.declined != "":
		return r.elsewhere(ctx, r.next, c, "the worker declined: "+a.declined, &r.stats.Others)
	}
	r.mu.Lock()
	r.stats.Jobs++
	r.mu.Unlock()
	return &proc.Result{Exit: proc.Exit{ExitCode: a.status}, Stdout: limit(a.stdout), Stderr: limit(a.stderr),
		CPU: a.cpu, MaxRSS: a.maxRSS, Wall: time.Since(start), Worker: true}, nil
}

// refuse says why c does not go to a worker, "" if it does.
func (r *runner) refuse(ctx context.Context, c *proc.Cmd, dir string, env []string) string {
	if len(c.Argv) == 0 {
		return "an empty command"
	}
	if c.Stdout != nil || c.Nice > 0 {
		return "a job whose output streams or that runs niced"
	}
	if a := untested(c.Argv); a != "" {
		return fmt.Sprintf("the worker is not tested with %s", a)
	}
	r.mu.Lock()
	ch := r.compilers[c.Argv[0]]
	if ch == nil {
		ch = &check{}
		r.compilers[c.Argv[0]] = ch
	}
	r.mu.Unlock()
	ch.once.Do(func() { ch.why = Check(ctx, r.opts.Path, c.Argv[0], dir, env) })
	return ch.why
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

// runOn runs one job on w. why, when not empty, says why w failed it (and
// w is gone); err is ctx's when ctx ended first (and w is gone).
func (r *runner) runOn(ctx context.Context, w *process, dir string, argv, env []string) (a *answer, why string, err error) {
	type reply struct {
		a   *answer
		err error
	}
	done := make(chan reply, 1)
	go func() {
		a, err := w.do(dir, argv, env)
		done <- reply{a, err}
	}()
	timeout := time.NewTimer(r.opts.Timeout)
	defer timeout.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	stop := func(reason string) {
		w.kill()
		<-done
		w.wait()
		why = reason
	}
	memory := fmt.Sprintf("the worker passed its memory bound (%d MiB)", r.opts.MemLimit>>20)
	if w.rss() > r.opts.MemLimit {
		stop(memory)
		return nil, why, nil
	}
	for {
		select {
		case rp := <-done:
			if rp.err != nil {
				return nil, fmt.Sprintf("the worker ended mid-job (%s)", w.wait()), nil
			}
			r.put(w)
			return rp.a, "", nil
		case <-ctx.Done():
			stop("")
			return nil, "", ctx.Err()
		case <-timeout.C:
			stop(fmt.Sprintf("the job ran past the worker's time bound (%s)", r.opts.Timeout))
			return nil, why, nil
		case <-poll.C:
			if w.rss() > r.opts.MemLimit {
				stop(memory)
				return nil, why, nil
			}
		}
	}
}

// get takes an idle worker or starts one. Once a worker cannot be
// started, no other is tried.
func (r *runner) get() (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken != "" {
		return nil, fmt.Errorf("%s", r.broken)
	}
	if n := len(r.idle); n > 0 {
		w := r.idle[n-1]
		r.idle = r.idle[:n-1]
		return w, nil
	}
	w, err := start(r.opts.Path)
	if err != nil {
		r.broken = fmt.Sprintf("cannot start the worker %s: %v", r.opts.Path, err)
		return nil, fmt.Errorf("%s", r.broken)
	}
	r.stats.Started++
	return w, nil
}

// put returns w after a job: idle, or replaced when it has served its
// jobs or grown past RecycleRSS.
func (r *runner) put(w *process) {
	r.mu.Lock()
	recycle := w.jobs >= r.opts.MaxJobs || w.peak > r.opts.RecycleRSS
	if recycle {
		r.stats.Recycled++
	} else {
		r.idle = append(r.idle, w)
	}
	r.mu.Unlock()
	if recycle {
		go w.close()
	}
}

func (r *runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *runner) Close() {
	r.mu.Lock()
	idle := r.idle
	r.idle = nil
	r.mu.Unlock()
	for _, w := range idle {
		w.close()
	}
}

func limit(b []byte) []byte {
	var c proc.Capture
	c.Write(b)
	return c.Bytes()
}
