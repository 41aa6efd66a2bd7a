package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Options configure a Pool.
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
	// MaxIdle bounds the idle workers kept for later jobs (the others
	// are closed when their job ends); 0 means no bound.
	MaxIdle int
}

// Outcome is how a job given to Workers ended: done (its status and
// output), or, when Elsewhere or Rerun is set, not done.
type Outcome struct {
	// Elsewhere says why no worker started the job (not this compiler,
	// declined, no worker could be started): the next runner runs it.
	Elsewhere string
	// Rerun says why the job's worker failed it (died, hung, grew past
	// its memory bound): the job is rerun by exec.
	Rerun string

	Status         int
	MaxRSS         int64 // the worker's peak RSS, in bytes
	CPU            time.Duration
	Stdout, Stderr []byte

	Started  bool // a worker was started for this job
	Recycled bool // its worker was replaced after the job
}

// Workers is where a Runner's jobs run: a Pool in this process, or the
// per-user server's (internal/local/workerserver).
type Workers interface {
	// Run runs one backend job (its directory, argv and environment) on
	// a worker that can stand in for argv[0] (see Check). A non-nil error
	// is ctx's, when it ended first: the job's worker has been killed.
	Run(ctx context.Context, dir string, argv, env []string) (*Outcome, error)
	// Close ends the idle workers; call it once no job runs.
	Close()
}

// PoolStats count what a Pool did and holds.
type PoolStats struct {
	Jobs     int `json:"jobs"`     // compiled by a worker
	Started  int `json:"started"`  // workers started
	Recycled int `json:"recycled"` // workers replaced after MaxJobs or RecycleRSS
	Idle     int `json:"idle"`     // workers waiting for a job now
	Busy     int `json:"busy"`     // workers running a job now, or lent (Loan)
}

// Pool owns thindist-worker processes: it starts them, runs one job at a
// time on each under its time and memory bounds, keeps the idle ones,
// recycles the worn ones, and checks each compiler once (by its file's
// identity, so a changed compiler is checked again). The per-link Runner
// and the per-user server both run their jobs through one.
type Pool struct {
	opts   Options
	checks verdicts

	mu     sync.Mutex
	idle   []*process
	busy   map[*process]bool
	broken string // why no worker can be started, once one could not
	stats  PoolStats
}

// NewPool returns a Pool of the workers at opts.Path; none starts before
// the first job.
func NewPool(opts Options) *Pool {
	return &Pool{opts: opts.withDefaults(), busy: map[*process]bool{}}
}

// withDefaults is o with its zero bounds set to their defaults.
func (o Options) withDefaults() Options {
	if o.MaxJobs == 0 {
		o.MaxJobs = 500
	}
	if o.RecycleRSS == 0 {
		o.RecycleRSS = 2 << 30
	}
	if o.MemLimit == 0 {
		o.MemLimit = 8 << 30
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	return o
}

// Describe names the pool in a runner chain (describe.Describer).
func (p *Pool) Describe() describe.Node { return describe.Node{Name: "WorkerPool"} }

// Run implements Workers.
func (p *Pool) Run(ctx context.Context, dir string, argv, env []string) (*Outcome, error) {
	if why := p.Check(ctx, argv[0], dir, env); why != "" {
		return &Outcome{Elsewhere: why}, nil
	}
	w, started, err := p.get()
	if err != nil {
		return &Outcome{Elsewhere: err.Error()}, nil
	}
	a, why, err := p.runOn(ctx, w, dir, argv, env)
	switch {
	case err != nil:
		return nil, err
	case why != "":
		return &Outcome{Rerun: why, Started: started}, nil
	}
	recycled := p.put(w)
	o := a.outcome()
	if o.Elsewhere == "" {
		p.mu.Lock()
		p.stats.Jobs++
		p.mu.Unlock()
	}
	o.Started, o.Recycled = started, recycled
	return o, nil
}

// outcome is the Outcome of a job the worker answered: done, or declined
// (the next runner runs it).
func (a *answer) outcome() *Outcome {
	if a.declined != "" {
		return &Outcome{Elsewhere: "the worker declined: " + a.declined}
	}
	return &Outcome{Status: a.status, MaxRSS: a.maxRSS, CPU: a.cpu, Stdout: a.stdout, Stderr: a.stderr}
}

// Check reports why the pool's workers cannot stand in for compiler (run
// from dir with env), "" when they can: Check's verdict, kept for as long
// as the compiler's file is the same one.
func (p *Pool) Check(ctx context.Context, compiler, dir string, env []string) string {
	return p.checks.get(ctx, compiler, dir, env, func() string { return Check(ctx, p.opts.Path, compiler, dir, env) })
}

// Compilers lists the compilers checked so far and their verdicts.
func (p *Pool) Compilers() []Verdict { return p.checks.list() }

// runOn runs one job on w. why, when not empty, says why w failed it (and
// w is gone); err is ctx's when ctx ended first (and w is gone). Otherwise
// the caller puts w back.
func (p *Pool) runOn(ctx context.Context, w *process, dir string, argv, env []string) (a *answer, why string, err error) {
	return runJob(ctx, w, p.opts, p.gone, dir, argv, env)
}

// runJob runs one job on w under opts' time and memory bounds. why, when
// not empty, says why w failed it; err is ctx's when ctx ended first.
// Either way w has been killed and gone (which says how it ended) called.
func runJob(ctx context.Context, w *process, opts Options, gone func(*process) string, dir string, argv, env []string) (a *answer, why string, err error) {
	type reply struct {
		a   *answer
		err error
	}
	done := make(chan reply, 1)
	go func() {
		a, err := w.do(dir, argv, env)
		done <- reply{a, err}
	}()
	timeout := time.NewTimer(opts.Timeout)
	defer timeout.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	stop := func(reason string) {
		w.kill()
		<-done
		gone(w)
		why = reason
	}
	memory := fmt.Sprintf("the worker passed its memory bound (%d MiB)", opts.MemLimit>>20)
	if w.rss() > opts.MemLimit {
		stop(memory)
		return nil, why, nil
	}
	for {
		select {
		case rp := <-done:
			if rp.err != nil {
				return nil, fmt.Sprintf("the worker ended mid-job (%s)", gone(w)), nil
			}
			return rp.a, "", nil
		case <-ctx.Done():
			stop("")
			return nil, "", ctx.Err()
		case <-timeout.C:
			stop(fmt.Sprintf("the job ran past the worker's time bound (%s)", opts.Timeout))
			return nil, why, nil
		case <-poll.C:
			if w.rss() > opts.MemLimit {
				stop(memory)
				return nil, why, nil
			}
		}
	}
}

// get takes an idle worker or starts one (started). Once a worker cannot
// be started, no other is tried.
func (p *Pool) get() (w *process, started bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != "" {
		return nil, false, fmt.Errorf("%s", p.broken)
	}
	if n := len(p.idle); n > 0 {
		w = p.idle[n-1]
		p.idle = p.idle[:n-1]
	} else {
		if w, err = start(p.opts.Path); err != nil {
			p.broken = fmt.Sprintf("cannot start the worker %s: %v", p.opts.Path, err)
			return nil, false, fmt.Errorf("%s", p.broken)
		}
		p.stats.Started++
		started = true
	}
	p.busy[w] = true
	return w, started, nil
}

// put returns w after a job: idle, or closed when it has served its jobs,
// grown past RecycleRSS (recycled) or would pass MaxIdle.
func (p *Pool) put(w *process) (recycled bool) {
	p.mu.Lock()
	delete(p.busy, w)
	recycled = w.jobs >= p.opts.MaxJobs || w.peak > p.opts.RecycleRSS
	keep := !recycled && (p.opts.MaxIdle == 0 || len(p.idle) < p.opts.MaxIdle)
	if recycled {
		p.stats.Recycled++
	}
	if keep {
		p.idle = append(p.idle, w)
	}
	p.mu.Unlock()
	if !keep {
		go w.close()
	}
	return recycled
}

// gone forgets w, which died or was killed, and says how it ended.
func (p *Pool) gone(w *process) string {
	p.mu.Lock()
	delete(p.busy, w)
	p.mu.Unlock()
	return w.wait()
}

// Stats says what the pool did and holds now.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Idle, st.Busy = len(p.idle), len(p.busy)
	return st
}

// Changed says why the running workers no longer match what is on disk,
// "" when they do: a file a worker has mapped to run (its executable, the
// clang and LLVM libraries) was replaced since it started, as an upgrade
// does, which /proc/PID/maps shows as " (deleted)". Its clang is then
// another one, and every verdict of Check may be stale.
func (p *Pool) Changed() string {
	p.mu.Lock()
	ws := append([]*process(nil), p.idle...)
	for w := range p.busy {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		if f := w.p.Replaced(); f != "" {
			return fmt.Sprintf("%s, which a worker runs, was replaced on disk", f)
		}
	}
	return ""
}

// Close implements Workers.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.close()
	}
}
