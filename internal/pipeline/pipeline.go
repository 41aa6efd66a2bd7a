// Package pipeline runs backend actions from any job source through the
// executor chain and reports on them. It is the one place that turns a
// Config into executors and observers, so the DTLTO job file, `thindist
// link` and the plugin all get the same behaviour.
package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/llvm/tools"
	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/redact"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sched/dispatch"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sched/slots"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/gctune"
	"github.com/thindist/thindist/internal/sys/jobserver"
	"github.com/thindist/thindist/internal/sys/plainfile"
	"github.com/thindist/thindist/internal/sys/rundir"
)

// Env is what a run may touch of its surroundings.
type Env struct {
	// Stderr receives progress, warnings, errors and the summary.
	Stderr io.Writer
	// Terminal says whether Stderr is a terminal (for --progress auto).
	Terminal bool
	// Getenv reads the environment.
	Getenv func(string) string
	// Environ lists the environment (os.Environ), for the warning about
	// THINDIST_* variables no setting reads; nil checks none.
	Environ func() []string
	// Jobserver is make's jobserver, checked when the process started
	// (jobserver.Inherit): the zero value runs without one.
	Jobserver jobserver.Inherited
	// Diag, when set, receives every error and warning instead of Stderr
	// (the plugin hands them to the linker's diagnostics); progress and the
	// summary still go to Stderr. Nil prints them on Stderr.
	Diag func(Diagnostic)
	// Record, when set, hears the run (its actions, keys and settings) and
	// orders the actions by its history; the caller finishes and saves it.
	Record *record.Recorder
	// Dialing, when set, is the connection to the remote service, begun
	// before the run (StartDial); the caller closes it if the run did not
	// take it.
	Dialing *remote.Dialing
	// GC, when set, is switched for the backends and for the end of the
	// run (gctune).
	GC *gctune.Tuner
	// Self, when set, is the thindist executable: `Self server run` starts
	// the per-user worker server (internal/local/workerserver). Empty (the
	// plugin, tests): the workers live for one link.
	Self string
	// Exec, when set, replaces this process with the command argv run in
	// dir (syscall.Exec) and returns only if it cannot: `thindist link`
	// hands a link it leaves to the linker over this way, so that nothing
	// of thindist outlives the decision. Nil (tests, the benchmarks): such
	// a link runs as a child.
	Exec func(dir string, argv []string) error
}

// StdEnv is the environment of a command-line run, with the jobserver
// that process inherited.
func StdEnv(js jobserver.Inherited) Env {
	return Env{Stderr: os.Stderr, Terminal: report.IsTerminal(os.Stderr), Getenv: os.Getenv, Environ: os.Environ, Jobserver: js}
}

// Options are what a caller adds to a run besides its configuration.
type Options struct {
	// Summary counts the run for the summary line and holds its clock and
	// phases, started when the caller's run began (for `thindist link`,
	// before the thin link). A caller that passes one prints it itself,
	// after its own last step, unless cfg.Quiet. Nil: RunWith counts the run
	// from its own start and prints the line.
	Summary *report.Summary
	// Background, when set, counts a goroutine that writes the run's
	// trace after RunWith has returned, while the caller goes on (the Session
	// writes its record meanwhile, the linker waiting for both); the caller
	// waits for it before it exits. Nil: the trace is written before RunWith
	// returns.
	Background *sync.WaitGroup
}

// RunWith executes actions as cfg says and prints what happened. An error
// it returns has been printed already and is a *Reported, unless it is a
// problem with cfg itself.
func RunWith(ctx context.Context, cfg *config.Config, env Env, actions []*action.Action, opts Options) error {
	summary, printSummary := opts.Summary, opts.Summary == nil && !cfg.Quiet
	if summary == nil {
		summary = report.NewSummary(report.NewTimeline(time.Now(), nil))
	}
	tl := summary.Timeline()
	live := cfg.Progress == "always" || cfg.Progress == "auto" && env.Terminal
	console := report.NewConsole(env.Stderr, live)
	if dir := rundir.Path(env.Getenv); live && env.Terminal && rundir.Private(dir) == nil {
		// Two links in one terminal take turns at the line. Terminal is
		// os.Stderr's, which Stderr (a copy kept for the record) ends in.
		defer console.ShareTerminal(dir, os.Stderr)()
	}

	warn := func(format string, args ...any) {
		diag(env, console, Diagnostic{Warning: true, Msg: fmt.Sprintf(format, args...)})
	}
	files := digest.NewFiles()
	var shards *reapi.ShardMemo
	if !cfg.NoCache {
		// Inputs unchanged since an earlier link are not hashed again.
		files = digest.NewFilesWith(digest.LoadTable(filepath.Join(cfg.CacheRoot(env.Getenv), "digests")))
		defer files.Save() // only a memo: a failure costs hashes next time
		// Nor are index shards an earlier link wrote alike decoded again.
		if id := selfIdentity(env.Self); id != "" {
			shards = reapi.LoadShardMemo(filepath.Join(cfg.CacheRoot(env.Getenv), "shards"), id)
			defer shards.Save() // a memo too
		}
	}
	if !cfg.NoCache || cfg.Remote.Target != "" {
		// Every input's digest goes into the cache keys and the remote
		// actions: hashing them from now on overlaps connecting to the
		// remote service and reading the history, where the first
		// actions' keys would otherwise wait for them (a program's main
		// module imports hundreds).
		pctx, stopPrefetch := context.WithCancel(ctx)
		defer stopPrefetch()
		files.Prefetch(pctx, inputPaths(actions), runtime.GOMAXPROCS(0))
	}
	planned := planFromHistory(cfg, env, actions)
	ch, err := buildChain(ctx, cfg, env, console, warn, tl, actions, files, shards)
	est := <-planned
	if err != nil {
		return err
	}
	finish := func() { ch.finish(cfg, env, console, tl, warn) }
	finished := false
	defer func() {
		if !finished {
			finish()
		}
	}()

	observers := []schedule.Observer{summary, warnings{env, console}}
	var progress *report.Progress
	var slots schedule.SlotObserver
	if live {
		progress = report.NewProgress(console, tl, summary.Output)
		progress.Expect(actions, est) // their expected times, from history
		observers = append(observers, progress)
		// Actions waiting for a local slot show as queued, not running.
		slots = progress
	}
	var trace *report.Trace
	if cfg.Trace != "" {
		trace = report.NewTrace()
		observers = append(observers, trace)
	}
	if rec := env.Record; rec != nil {
		rec.Update(func(run *record.Run) { run.Jobs = cfg.Jobs })
		observers = append(observers, rec)
	}

	endBackends := tl.Begin("backends")
	if cfg.Remote.Target != "" {
		env.GC.Steady(gctune.Remote())
	} else {
		env.GC.Steady(gctune.Local())
	}
	runErr := schedule.Run(ctx, actions, ch.ex, schedule.Options{
		Parallel:  ch.parallel,
		Preparing: ch.preparing,
		Observer:  report.Tee(observers...),
		Planner:   ch.planner,
		Slots:     slots,
		Estimates: est,
	})
	endBackends()
	env.GC.Finishing()
	if progress != nil {
		progress.Stop()
	}
	finish() // its cache and remote counters print before the summary line
	finished = true
	keepFailed(cfg.CacheRoot(env.Getenv), summary.Output, actions, runErr)
	if runErr != nil {
		reportFailure(env, console, runErr)
	}
	if printSummary {
		console.Printf("%s", summary.Line())
	}
	if trace != nil {
		if opts.Background != nil {
			opts.Background.Go(func() {
				writeTrace(cfg, env, console, trace)
			})
		} else {
			writeTrace(cfg, env, console, trace)
		}
	}
	if runErr != nil {
		return &Reported{Err: runErr}
	}
	return nil
}

// planFromHistory weighs the actions' modules and reads the run history's
// expected times of them (the scheduler's estimates, which order them), in
// the background: reading it overlaps connecting to the remote service,
// which takes a round trip or more. The channel yields them once done.
func planFromHistory(cfg *config.Config, env Env, actions []*action.Action) <-chan *schedule.Estimates {
	planned := make(chan *schedule.Estimates, 1)
	go func() {
		weights := schedule.Weigh(actions) // the one read of the modules' sizes
		var expected map[*action.Action]time.Duration
		if rec := env.Record; rec != nil && !cfg.NoRecord {
			expected = rec.Plan(record.Open(cfg.CacheRoot(env.Getenv)), actions, weights)
		}
		planned <- schedule.NewEstimates(weights, expected)
	}()
	return planned
}

// speculativeNice is how much lower a race's local try runs (nice(1)).
const speculativeNice = 10

// localExecutors builds the run's local executors: each runs its compilers
// with opts (the environment, the runner), each process in one of procs,
// this machine's process slots, as its Limiter asks.
type localExecutors struct {
	procs dispatch.Processes
	opts  executor.LocalOptions
}

// build returns a Verified local executor that asks l for its slots and
// runs its compilers at nice.
func (le localExecutors) build(l executor.Limiter, nice int) executor.Executor {
	o := le.opts
	o.Limiter, o.Nice = l, nice
	return executor.Verified(executor.NewLocal(o))
}

// chain is the executor chain of a run and what the scheduler needs with
// it.
type chain struct {
	ex executor.Executor
	// parallel is how many actions may be in flight, preparing how many
	// of them may prepare at once (schedule.Options).
	parallel, preparing int
	// planner, if set, hears the actions' order and when every action has
	// started.
	planner schedule.Planner

	// The parts whose counters the run's end reads (RunStats), nil when
	// the chain has none: the local cache, its executor, the remote
	// chain.
	disk   *cache.Disk
	cached *cache.Executor
	remote *remoteChain
	// release frees what the local side holds (the jobserver, fork
	// servers, workers), the last first (close).
	release []func()
}

// inputPaths lists the distinct input files of actions whose digests the
// keys and remote actions ask for, in the order the actions are given.
// Index shards are not among them: the key decodes its action's shard and
// the remote action sends it from memory, and neither asks for its file
// digest; hashing each one ahead would read every shard once more for
// nothing, on the cores the first actions need.
func inputPaths(actions []*action.Action) []string {
	seen := map[string]bool{}
	var paths []string
	for _, a := range actions {
		for _, in := range a.Inputs {
			if in.Role == action.RoleIndex {
				continue
			}
			if p := a.Abs(in.Local()); !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// buildChain composes the executors cfg asks for. docs/architecture.md
// shows the chain of each mode, as executor.Describe prints it (and
// TestChainDoc checks). Every producer is wrapped in Verified, so nothing
// unverified is stored or linked. files memoises the inputs' digests,
// shards (if not nil) what the keys take from the index shards.
func buildChain(ctx context.Context, cfg *config.Config, env Env, console *report.Console, warn func(string, ...any), tl *report.Timeline, actions []*action.Action, files *digest.Files, shards *reapi.ShardMemo) (*chain, error) {
	procs, closeJobserver := localProcesses(cfg, env, warn)
	dir := cfg.CacheRoot(env.Getenv)
	// Read once, for exec'd and forked compilers alike.
	environ := os.Environ()
	runner, closeRunner := localRunner(cfg, env, dir, environ, len(actions), tl, warn)
	locals := localExecutors{procs: procs, opts: executor.LocalOptions{Env: environ, Runner: runner}}
	local := locals.build(procs, 0)
	ch := &chain{ex: local, parallel: cfg.Jobs, release: append([]func(){closeJobserver}, closeRunner...)}

	disk, err := openCache(cfg, dir, warn)
	if err != nil {
		ch.close()
		return nil, err
	}
	idDir := ""
	if disk != nil {
		idDir = filepath.Join(dir, "compilers")
	}
	// A shipped compiler is identified by its whole tree; nil when the
	// workers run their own compiler.
	var ship *toolchain.Shipping
	if shipsToolchain, _ := cfg.Remote.ShipsToolchain(); shipsToolchain && cfg.Remote.Target != "" {
		ship = toolchain.NewShipping(env.Getenv, files, warn)
	}
	compilerID := ship.Identify(tools.NewIDs(idDir).ID)
	var conn *remoteConn
	switch rc := &cfg.Remote; {
	case rc.Target == "":
	case disk != nil && allCached(ctx, disk, newKeyer(files, shards, compilerID, Env{Getenv: env.Getenv}, rc, nil), actions):
		// Nothing to run: no need to connect.
	default:
		if conn, err = connectRemote(ctx, cfg, env, warn, tl, dir); err != nil {
			if rc.Fallback == "none" {
				ch.close()
				return nil, err
			}
			warn("%v; compiling locally", err)
		}
	}
	if conn != nil {
		conn.ship = ship
	}
	// The keys, built once: what the remote service changes in them is
	// known now.
	keys := newKeyer(files, shards, compilerID, env, &cfg.Remote, conn)
	if conn != nil {
		r := newRemote(ctx, cfg, env, warn, conn, keys, locals)
		ch.ex, ch.parallel, ch.preparing, ch.planner, ch.remote = r.chain, r.parallel, r.preparing, r.planner, r
		if env.Record != nil {
			env.Record.Update(func(run *record.Run) { run.Remote, run.RemoteJobs = cfg.Remote.Target, cfg.Remote.Jobs })
		}
	}
	// Each result says what its action sent to and read from the remote
	// service, for the record.
	if disk == nil {
		ch.ex = executor.Metered(ch.ex)
		return ch, nil
	}
	// The links sharing the cache compile an action they miss at once
	// once (cache.Claims; docs/design.md).
	claims, err := cache.NewClaims(filepath.Join(disk.Dir(), "claims"))
	if err != nil {
		warn("%v; links sharing the cache may compile the same backend at once", err)
		claims = nil
	}
	cached := cache.NewExecutor(disk, keys, ch.ex, cache.Options{Where: executor.LocalCache, Warn: report.Limited(warn),
		Unusable: env.Record.Unusable, Run: env.Record.ID(), Claims: claims})
	if env.Record != nil {
		env.Record.Update(func(run *record.Run) { run.LocalCache, run.CacheLimit = true, cfg.CacheLimit() })
	}
	ch.disk, ch.cached = disk, cached
	ch.ex = executor.Metered(executor.Verified(cached))
	return ch, nil
}

// localRunner is how the compilers of n actions run here: exec'd, forked
// from fork servers, or sent to workers; closers release what it holds,
// the last first. docs/architecture.md shows the runner chain of each
// mode, as proc.Describe prints it (and TestRunnerChainDoc checks).
func localRunner(cfg *config.Config, env Env, dir string, environ []string, n int, tl *report.Timeline, warn func(string, ...any)) (runner proc.Runner, closers []func()) {
	// A fork server pays for its start (loading the compiler once) from a
	// slot's second job on: a link with no more actions than local
	// slots (Kbuild's final vmlinux links have one) execs them at once.
	var forks *forkserver.Pool
	if !cfg.NoForkServer && n > cfg.Jobs {
		var closeForks func()
		forks, closeForks = forkserver.NewPoolIn(dir, environ, report.Limited(warn))
		closers = append(closers, closeForks, func() {
			// Run before closeForks (closers run last first), once the
			// backends phase has ended: its share spent starting servers.
			if st := forks.Stats(); st.Servers > 0 {
				tl.Detail("backends", fmt.Sprintf("%s starting %s", report.Round(st.Startup), plural(st.Servers, "fork server")))
			}
		})
	}
	runner = proc.Exec{}
	if forks != nil {
		runner = forks.Runner(runner, proc.DefaultGrace)
	}
	runner, closeWorkers := Workers(cfg, env, n, runner, tl, report.Limited(warn))
	return runner, append(closers, closeWorkers)
}

// openCache opens the local cache in dir, unless cfg turns it off (nil).
// A directory that cannot be used is an error if the user named it, and
// otherwise costs only the cache, with a warning.
func openCache(cfg *config.Config, dir string, warn func(string, ...any)) (*cache.Disk, error) {
	if cfg.NoCache {
		return nil, nil
	}
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		if cfg.CacheDir != "" {
			return nil, fmt.Errorf("the cache directory named by --cache-dir cannot be used: %w", err)
		}
		warn("running without a cache: %v", err)
		return nil, nil
	}
	return disk, nil
}

// CheckCacheDir returns an error if the cache directory the user named
// (--cache-dir, its variable or a config file) cannot be used, so that the
// command stops before anything runs; the default directory being unusable
// only costs the cache, with a warning, when the run starts.
func CheckCacheDir(cfg *config.Config) error {
	if cfg.CacheDir == "" || cfg.NoCache {
		return nil
	}
	_, err := cache.OpenDisk(cfg.CacheDir)
	return err
}

// writeTrace saves the trace under the --trace name, %p and %t expanded,
// with the run's command line, directory, output and messages as metadata.
func writeTrace(cfg *config.Config, env Env, console *report.Console, trace *report.Trace) {
	run := record.Run{PID: os.Getpid(), Start: time.Now()}
	if env.Record != nil {
		run = env.Record.Snapshot()
	}
	// A trace is made to be shared: no credential in it.
	run = *run.Redacted(redact.NewValues(cfg.Remote.Secrets()...))
	trace.SetMetadata(map[string]any{"version": run.Version, "command_line": run.Args, "dir": run.Dir,
		"output": run.Output, "messages": run.Log, "record": run.ID})
	path := report.TracePath(cfg.Trace, run.PID, run.Start)
	if err := trace.Write(path); err != nil {
		diag(env, console, Diagnostic{Warning: true, Msg: fmt.Sprintf("writing the trace %s: %v", path, err)})
	}
}

// selfIdentity names the thindist executable at self by its path and
// stamp, which a rebuilt or replaced executable changes: the identity of
// the code that normalises index shards (reapi.ShardMemo). "" when self
// is not set (the plugin, tests) or cannot be read.
func selfIdentity(self string) string {
	if self == "" {
		return ""
	}
	s, err := plainfile.StampOf(self)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s\x00%d %d %d %d %d", self, s.Dev, s.Ino, s.Size, s.Mtime, s.Ctime)
}

// plural is "1 fork server", "2 fork servers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// localProcesses is this machine's process slots: --jobs of them, the one
// count every local executor and the Hybrid's Dispatcher take them from,
// and under make a token of make's jobserver for each process (--jobs
// bounds this link, the jobserver the whole build). closeJobserver releases the
// jobserver.
func localProcesses(cfg *config.Config, env Env, warn func(string, ...any)) (p dispatch.Processes, closeJobserver func()) {
	p.Slots = slots.NewPool(cfg.Jobs)
	js := env.Jobserver
	if js.Err != nil {
		warn("%v; using --jobs=%d", js.Err, cfg.Jobs)
	}
	if js.Client == nil {
		return p, func() {}
	}
	p.Tokens = tokens(js.Client, cfg.Jobs, warn)
	return p, js.Client.Close
}

// tokens is make's jobserver js as a Limiter that a jobserver stopping
// mid-run does not fail (jobserver.Tolerant): warned about once, the link
// goes on with --jobs alone.
func tokens(js jobserver.Acquirer, jobs int, warn func(string, ...any)) executor.Limiter {
	return jobserver.Tolerant(js, func(err error) { warn("%v; using --jobs=%d", err, jobs) })
}
