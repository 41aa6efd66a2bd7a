package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/local/workerserver"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/sys/describe"
	"github.com/thindist/thindist/internal/sys/rundir"
)

// Workers puts a worker.Runner in front of runner, for a link of n
// actions, when cfg allows and a thindist-worker is there: the one
// --worker names (a warning when it is not), else the one beside
// thindist's executable (none is fine: workers are optional). The jobs a
// worker does not take go to runner, the jobs a worker failed are rerun
// by exec.
//
// The workers are the per-user server's (internal/local/workerserver), reached
// or started at the link's first job, when the server is on (cfg's
// ServerIdle above 0) and env.Self can start one: warm, they serve every
// link, small ones too, and so do the server's fork servers for the jobs
// the workers do not take (serverForks; not under --no-fork-server),
// before runner. Otherwise, or when the server's directory is not
// the user's alone or no server can be reached, they are the link's own,
// started where a fork server pays (more actions than local slots). The
// returned func ends the link's use of them and notes on tl how many
// backends they compiled.
func Workers(cfg *config.Config, env Env, n int, runner proc.Runner, tl *report.Timeline, warn func(string, ...any)) (proc.Runner, func()) {
	path := WorkerPath(cfg, warn)
	if path == "" {
		return runner, func() {}
	}
	opts := worker.Options{Path: path}
	var w worker.Runner
	var forks *serverForks
	switch idle := cfg.ServerIdle(env.Getenv); {
	case idle > 0 && env.Self != "":
		dir := ServerDir(cfg, env)
		if err := rundir.Private(dir); err != nil {
			warn("no worker server: %v; the workers live for this link only", err)
			if n <= cfg.Jobs {
				return runner, func() {}
			}
			w = worker.NewRunner(runner, proc.Exec{}, opts)
			break
		}
		s := &serverOrPool{o: workerserver.ConnectOptions{Dir: dir, Self: env.Self, Worker: path, Idle: idle},
			pool: opts, rec: env.Record, warn: warn}
		next := runner
		if !cfg.NoForkServer {
			forks = &serverForks{s: s, next: runner}
			next = forks
		}
		w = worker.NewRunnerOn(s, next, proc.Exec{})
	case n > cfg.Jobs:
		w = worker.NewRunner(runner, proc.Exec{}, opts)
	default:
		return runner, func() {}
	}
	return w, func() {
		w.Close()
		if st := w.Stats(); st.Jobs > 0 || st.Reruns > 0 {
			tl.Detail("backends", fmt.Sprintf("%d on workers, %s started, %d rerun by exec", st.Jobs, plural(st.Started, "worker"), st.Reruns))
		}
		if forks != nil {
			if n := forks.n.Load(); n > 0 {
				tl.Detail("backends", fmt.Sprintf("%d forked by the worker server", n))
			}
		}
	}
}

// ServerDir is the worker server's directory: cfg's, else
// $XDG_RUNTIME_DIR/thindist, else /tmp/thindist-UID.
func ServerDir(cfg *config.Config, env Env) string {
	if cfg.ServerDir != "" {
		return cfg.ServerDir
	}
	return rundir.Path(env.Getenv)
}

// WorkerPath is the worker cfg names, else the one beside thindist's
// executable; "" for none (or cfg.NoWorker), with a warning when the one
// named is not there.
func WorkerPath(cfg *config.Config, warn func(string, ...any)) string {
	if cfg.NoWorker {
		return ""
	}
	if cfg.Worker != "" {
		if _, err := os.Stat(cfg.Worker); err != nil {
			warn("--worker: %v; compiling without a worker (build it with scripts/install.sh, or pass --no-worker)", err)
			return ""
		}
		return cfg.Worker
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	path := filepath.Join(filepath.Dir(exe), "thindist-worker")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// serverOrPool is the worker server's workers, reached (or started) at the
// first job; a Pool of the link's own when no server can be, with a
// warning. The record names the server.
type serverOrPool struct {
	o    workerserver.ConnectOptions
	pool worker.Options
	rec  *record.Recorder
	warn func(string, ...any)

	once sync.Once
	w    worker.Workers
}

func (s *serverOrPool) Run(ctx context.Context, dir string, argv, env []string) (*worker.Outcome, error) {
	return s.workers().Run(ctx, dir, argv, env)
}

// Describe names the server's workers in the runner chain, with the
// link's own pool they may turn out to be (describe.Describer).
func (s *serverOrPool) Describe() describe.Node {
	return describe.Node{Name: "WorkerServer", Notes: []string{"else WorkerPool"}}
}

// workers reaches (or starts) the server at the first call.
func (s *serverOrPool) workers() worker.Workers {
	s.once.Do(func() {
		cl, err := workerserver.Connect(s.o)
		if err != nil {
			s.warn("no worker server: %v; the workers live for this link only", err)
			s.w = worker.NewPool(s.pool)
			return
		}
		s.w = cl
		if s.rec != nil {
			s.rec.Update(func(run *record.Run) { run.WorkerServer = cl.String() })
		}
	})
	return s.w
}

// serverForks forks on the worker server's fork servers, warm across
// links, the jobs its workers do not take (another compiler than theirs,
// options they are not tested with, a race's niced try); next runs them
// when the link has no server, or the server cannot (a compiler it cannot
// fork, a job whose output streams).
type serverForks struct {
	s    *serverOrPool
	next proc.Runner
	n    atomic.Int64 // jobs forked by the server
}

// Describe names the runner and wraps next (describe.Describer).
func (f *serverForks) Describe() describe.Node {
	return describe.Node{Name: "ServerForks", Wraps: []any{f.next}}
}

func (f *serverForks) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	if cl, ok := f.s.workers().(*workerserver.Client); ok && len(c.Argv) > 0 && c.Stdout == nil && len(c.ExtraFiles) == 0 {
		res, err := cl.Fork(ctx, c)
		if !errors.Is(err, forkserver.ErrUnavailable) {
			if err == nil {
				f.n.Add(1)
			}
			return res, err
		}
	}
	return f.next.Run(ctx, c)
}

func (s *serverOrPool) Close() {
	s.once.Do(func() {}) // no job ran: nothing to reach
	if s.w != nil {
		s.w.Close()
	}
}
