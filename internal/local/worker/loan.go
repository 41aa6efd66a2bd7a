package worker

import (
	"bufio"
	"context"
	"os"
)

// A Loan is one of a Pool's workers lent to another process, a link of the
// per-user server (internal/local/workerserver), which then runs its jobs
// on it directly (Borrow) instead of having the server relay each one. The
// borrower gets the worker's pid and copies of its two pipes; the Pool
// keeps the worker busy until the loan ends, by Return (the borrower says
// the worker is between jobs) or Revoke (the borrower is gone, or broke
// off mid-job: the worker may be mid-message, so it is killed).
type Loan struct {
	pool    *Pool
	w       *process
	Started bool // a worker was started for the loan
}

// Lend lends a worker that can stand in for compiler (see Check), started
// if none is idle; why says why none is lent.
func (p *Pool) Lend(ctx context.Context, compiler, dir string, env []string) (l *Loan, why string) {
	if why := p.Check(ctx, compiler, dir, env); why != "" {
		return nil, why
	}
	w, started, err := p.get()
	if err != nil {
		return nil, err.Error()
	}
	return &Loan{pool: p, w: w, Started: started}, ""
}

// PID is the lent worker's process ID.
func (l *Loan) PID() int { return l.w.pid() }

// Pipes are the lent worker's standard input, which jobs are written to,
// and output, which answers are read from: the borrower's are copies.
func (l *Loan) Pipes() (in, out *os.File) { return l.w.in, l.w.outF }

// JobsLeft is how many jobs the worker may run before it is recycled.
func (l *Loan) JobsLeft() int { return max(0, l.pool.opts.MaxJobs-l.w.jobs) }

// Return ends the loan of a worker that is between jobs, which ran jobs
// with a peak RSS of peak (bytes) while lent: it is idle again, or
// recycled as after a job of the Pool's own.
func (l *Loan) Return(jobs int, peak int64) (recycled bool) {
	l.w.jobs += jobs
	l.w.peak = max(l.w.peak, peak)
	l.pool.mu.Lock()
	l.pool.stats.Jobs += jobs
	l.pool.mu.Unlock()
	return l.pool.put(l.w)
}

// Revoke ends the loan by killing the worker, and says how it ended.
func (l *Loan) Revoke() string {
	l.w.kill()
	return l.pool.gone(l.w)
}

// Borrowed is a worker another process's Pool lent this one (Loan): its
// jobs run here, one at a time, under opts' time and memory bounds, as a
// Pool's do.
type Borrowed struct {
	w        *process
	opts     Options
	jobsLeft int
	broken   bool
}

// Borrow adopts a lent worker: its pid, this process's copies of its pipes
// (the Borrowed owns them), how many jobs it may run (Loan.JobsLeft), and
// abort, which has the lender kill it (Revoke) and must not block.
func Borrow(pid int, in, out *os.File, jobsLeft int, opts Options, abort func()) *Borrowed {
	w := &process{lent: &lent{pid: pid, abort: abort}, in: in, outF: out, out: bufio.NewReaderSize(out, 64<<10)}
	return &Borrowed{w: w, opts: opts.withDefaults(), jobsLeft: jobsLeft}
}

// Run runs one job on the borrowed worker, as Pool.Run does. A non-nil
// error is ctx's, when it ended first. After an Outcome with Rerun set,
// or an error, the worker is gone (abort was called) and Usable is false.
func (b *Borrowed) Run(ctx context.Context, dir string, argv, env []string) (*Outcome, error) {
	a, why, err := runJob(ctx, b.w, b.opts, b.gone, dir, argv, env)
	switch {
	case err != nil:
		return nil, err
	case why != "":
		return &Outcome{Rerun: why}, nil
	}
	return a.outcome(), nil
}

// Usable says whether the worker can take another job: it is alive and
// neither has run its jobs nor grown past the recycling bound (then its
// loan should be returned, for the lender to recycle it).
func (b *Borrowed) Usable() bool {
	return !b.broken && b.w.jobs < b.jobsLeft && b.w.peak <= b.opts.RecycleRSS
}

// PID is the borrowed worker's process ID.
func (b *Borrowed) PID() int { return b.w.pid() }

// Usage is what the worker did while borrowed, for Loan.Return.
func (b *Borrowed) Usage() (jobs int, peak int64) { return b.w.jobs, b.w.peak }

// Close releases this process's copies of the worker's pipes; the worker
// itself is its lender's.
func (b *Borrowed) Close() {
	b.w.in.Close()
	b.w.outF.Close()
}

// gone is runJob's, for a worker that died or was killed: its lender is
// asked to end it (it reaps it, and alone knows how it ended).
func (b *Borrowed) gone(w *process) string {
	if !b.broken {
		b.broken = true
		w.lent.abort()
	}
	return "lent by the worker server"
}
