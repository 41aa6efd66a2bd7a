package pipeline

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/local/workerserver"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/report"
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
// the workers do not take (workerserver.ServerForks; not under --no-fork-server),
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
	var forks *workerserver.ServerForks
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
		var connected func(*workerserver.Client)
		if rec := env.Record; rec != nil {
			// The record names the server.
			connected = func(cl *workerserver.Client) { rec.Update(func(run *record.Run) { run.WorkerServer = cl.String() }) }
		}
		s := workerserver.NewLinkWorkers(workerserver.ConnectOptions{Dir: dir, Self: env.Self, Worker: path, Idle: idle}, opts, connected, warn)
		next := runner
		if !cfg.NoForkServer {
			forks = workerserver.NewServerForks(s, runner)
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
			if n := forks.Forked(); n > 0 {
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
