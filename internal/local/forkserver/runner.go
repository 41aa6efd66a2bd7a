package forkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/describe"
)

// Runner returns a proc.Runner that forks each command from the pool's
// server for its argv[0], with the pool's environment. What the pool cannot
// take (a script, a static binary, a job too large for a request, a server
// that died) and a command with another environment than the pool's are
// run by fallback. grace is how long a cancelled job has between SIGTERM
// and SIGKILL.
func (p *Pool) Runner(fallback proc.Runner, grace time.Duration) proc.Runner {
	if grace == 0 {
		grace = proc.DefaultGrace
	}
	return &runner{pool: p, fallback: fallback, grace: grace}
}

type runner struct {
	pool     *Pool
	fallback proc.Runner
	grace    time.Duration
}

// Describe names the runner and wraps its fallback (describe.Describer).
func (r *runner) Describe() describe.Node {
	return describe.Node{Name: "ForkServer", Wraps: []any{r.fallback}}
}

func (r *runner) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	if len(c.Argv) == 0 || len(c.ExtraFiles) > 0 || !r.pool.hasEnv(c.Env) {
		return r.fallback.Run(ctx, c)
	}
	dir := c.Dir
	if dir == "" {
		dir = "." // the server's, which is thindist's
	}
	var stdout, stderr proc.Capture
	var out io.Writer = &stdout
	if c.Stdout != nil {
		out = c.Stdout
	}
	// The first job of a compiler starts its server, and jobs arriving
	// meanwhile wait for it: that start-up is not the job's own time (the
	// pool reports it in its Stats).
	srv, err := r.pool.Server(ctx, c.Argv[0])
	if errors.Is(err, ErrUnavailable) {
		return r.fallback.Run(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot run %q: %w", c.Argv[0], err)
	}
	start := time.Now()
	// A niced (speculative) job is forked too: exec'ing the compiler
	// instead would cost a race's local try the compiler's start-up CPU
	// (see docs/design.md, "Fork server").
	st, err := srv.Run(ctx, Job{Argv: c.Argv, Dir: dir, Stdout: out, Stderr: &stderr, Nice: c.Nice}, r.grace)
	if errors.Is(err, ErrUnavailable) {
		return r.fallback.Run(ctx, c)
	}
	res := &proc.Result{Exit: proc.Exit{ExitCode: st.ExitCode, Signal: st.Signal}, CPU: st.CPU, MaxRSS: st.MaxRSS,
		Wall: time.Since(start), Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), By: proc.ByForkServer}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s stopped: %w", c.Argv[0], ctx.Err())
	}
	if err != nil {
		return res, fmt.Errorf("cannot run %q: %w", c.Argv[0], err)
	}
	return res, nil
}

// hasEnv reports whether env is the pool's environment: the very slice, so
// that the check costs nothing per job.
func (p *Pool) hasEnv(env []string) bool {
	return env != nil && len(env) == len(p.env) && (len(env) == 0 || &env[0] == &p.env[0])
}
