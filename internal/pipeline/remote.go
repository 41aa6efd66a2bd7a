package pipeline

import (
	"context"
	"runtime"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sched/dispatch"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sched/slots"
	"github.com/thindist/thindist/internal/sys/digest"
)

// remoteChain is the remote part of the executor chain, and the parts of
// it that the run's end drains, reads (RunStats) and closes.
type remoteChain struct {
	chain     executor.Executor
	parallel  int
	preparing int // schedule.Options.Preparing
	planner   schedule.Planner

	side   *remoteSide
	client *remote.Client
	rcache *cache.Executor
	behind *cache.WriteBehind
	// cpu0 is thindist's own CPU when it began to connect.
	cpu0 time.Duration
	// notes are where the link's measurements are kept (Notes.Remember).
	notes remote.Notes
}

// RemoteOptions turns the configuration into the client's options.
func RemoteOptions(r *config.Remote) remote.Options {
	compress := remote.CompressAuto
	switch r.Compress {
	case "downloads":
		compress = remote.CompressDownloads
	case "all":
		compress = remote.CompressAll
	case "none":
		compress = remote.CompressNone
	}
	return remote.Options{
		Target: r.Target, Instance: r.Instance, CA: r.CA, Cert: r.Cert, Key: r.Key,
		Headers: r.Headers, RPCTimeout: r.Timeout, MaxAttempts: r.Attempts,
		ExecStreams: r.Jobs, Compression: compress, Build: r.BuildID,
	}
}

// RemoteEnv is the fixed environment of remote commands: a PATH, plus the
// variables that change clang's behaviour (reapi.KeyEnv) as set here, so a
// remote compile behaves as the local one would.
func RemoteEnv(getenv func(string) string) [][2]string {
	env := [][2]string{{"PATH", "/usr/local/bin:/usr/bin:/bin"}}
	for _, name := range reapi.KeyEnv {
		if v := getenv(name); v != "" {
			env = append(env, [2]string{name, v})
		}
	}
	return env
}

// The remote cache's results are stored in bursts (cache.WriteBehind): a
// burst gathers what ends within storeWindow, or storeBurst bytes of
// objects; at most storePending bytes wait in memory, and a larger object
// is stored by its action, as it ends.
const (
	storeWindow  = 50 * time.Millisecond
	storeBurst   = 4 << 20
	storePending = 64 << 20
)

// remoteConn is the connection to the remote service and what the run
// uses it for, decided once it answers.
type remoteConn struct {
	client *remote.Client
	// cacheOnly: no remote execution (--remote-cache-only, or the service
	// offers none).
	cacheOnly bool
	// readOnly: the run does not write the ActionCache (cache-only without
	// --remote-upload, or the service does not let clients write it).
	readOnly bool
	// cpu0 is thindist's own CPU time when it began to connect.
	cpu0 time.Duration
	// notes are the cache directory's notes of the services.
	notes remote.Notes
	// ship is the run's shipped toolchains, nil when the workers run
	// their own compiler.
	ship *toolchain.Shipping
}

// connectRemote dials the service, or waits for the dial begun before the
// run (Env.Dialing), and decides what the run uses it for.
//
// A service that a link found unreachable within remote.UnreachableFor
// is not tried (unless --remote-fallback=none); one found unreachable
// now, or down mid-link, is marked so in the cache directory dir's notes
// (remote.Notes), and one reached has its mark cleared.
func connectRemote(ctx context.Context, cfg *config.Config, env Env, warnAll func(string, ...any), tl *report.Timeline, dir string) (*remoteConn, error) {
	rc := &cfg.Remote
	notes := remote.NotesIn(dir)
	if rc.Fallback != "none" {
		if err := notes.Unreachable(rc.Target, time.Now()); err != nil {
			return nil, err
		}
	}
	conn := &remoteConn{cpu0: ownCPU(), notes: notes}
	opts := RemoteOptions(rc)
	endConnect := tl.Begin("connecting") // or waiting for the dial begun before the run
	var err error
	conn.client, err = env.Dialing.Connect(ctx, opts)
	endConnect()
	if err != nil {
		if remote.Unreachable(err) {
			notes.MarkUnreachable(rc.Target, time.Now())
		}
		return nil, err
	}
	notes.ClearUnreachable(rc.Target)
	conn.client.Recall(notes.Recall(rc.Target))
	conn.client.OnDown(func(err error) {
		notes.MarkUnreachable(rc.Target, time.Now())
		warnAll("%v: not using it for the rest of this link; the remaining actions compile here, and their results are not stored there", err)
	})
	conn.cacheOnly = rc.CacheOnly
	if !conn.cacheOnly && !conn.client.ExecEnabled() {
		warnAll("%s offers no remote execution; using it as a cache only", rc.Target)
		conn.cacheOnly = true
	}
	conn.readOnly = conn.cacheOnly && !rc.Upload || !conn.client.ACUpdateEnabled()
	return conn, nil
}

// newKeyer is the run's Keyer, built once: files memoises the inputs'
// digests, shards (if not nil) what keys take from index shards,
// compilerID names a compiler (tools.IDs). With a remote
// service (rc.Target) the workers' compiler and platform are part of
// every key, whether the run reached it or not (conn nil: not connected),
// so that a link without it finds what links with it stored here, and
// the other way round; once connected, the canonical messages are kept
// for the ActionCache's writer.
func newKeyer(files *digest.Files, shards *reapi.ShardMemo, compilerID func(string) (string, error), env Env, rc *config.Remote, conn *remoteConn) *reapi.Keyer {
	keys := &reapi.Keyer{Files: files, Shards: shards, CompilerID: compilerID, Getenv: env.Getenv}
	if env.Record != nil {
		keys.Observe = env.Record.Key
	}
	if rc.Target == "" {
		return keys
	}
	if rc.Compiler != "" {
		// The workers' compiler is part of every key.
		keys.CompilerID = func(path string) (string, error) {
			id, err := compilerID(path)
			return id + "\x00remote-compiler=" + rc.Compiler, err
		}
	}
	if conn == nil {
		// Remote execution is in use unless rc says cache only.
		if !rc.CacheOnly {
			keys.Platform = reapi.Platform(rc.Platform)
		}
		return keys
	}
	if !conn.cacheOnly {
		keys.Platform = reapi.Platform(rc.Platform)
	}
	// Each entry goes with its canonical Action and Command (REAPI: a
	// client writing the ActionCache puts them in the CAS first).
	keys.KeepMessages = !conn.readOnly
	return keys
}

// allCached reports whether the local cache has the result of every
// action under probe's keys (those the remote configuration gives them,
// newKeyer without a connection), so that the link need not connect to
// the service at all: a fully cached link does not wait for it, nor stall
// when it is down.
func allCached(ctx context.Context, disk *cache.Disk, probe *reapi.Keyer, actions []*action.Action) bool {
	for _, a := range actions {
		key, _, err := probe.KeyShard(a)
		if err != nil {
			return false
		}
		if _, err := disk.GetActionResult(ctx, nil, key, nil); err != nil {
			return false
		}
	}
	return true
}

// remoteSide is the remote execution part of the chain and the parts of
// it whose counters the run reports.
type remoteSide struct {
	producer executor.Executor
	parallel int
	planner  schedule.Planner
	// dispatcher hands out the Hybrid's slots and makes its choices.
	dispatcher *dispatch.Dispatcher
	rex        *remote.Executor
	fb         *executor.Fallback
	hybrid     *executor.Hybrid
	hedge      *executor.Hedge
	grouper    *remote.Grouper
	// compilerCheck, with --remote-compiler, checks the workers'
	// compiler once the first action is sent for execution.
	compilerCheck *remote.CompilerCheck
}

// newRemoteSide builds the remote execution part of the chain on client:
// the Dispatcher (slots and plan) first, then the executors that use it,
// innermost first (docs/architecture.md shows the result). Each slot has
// one owner, which every executor that needs one asks: this machine's
// process slots (locals.procs), which the Dispatcher grants to the
// Hybrid's local side and the races (Granted) and the other local
// executors ask for through it (Processes); the Dispatcher's remote slots;
// and with grouping the Grouper's remote executions.
func newRemoteSide(cfg *config.Config, env Env, conn *remoteConn, client *remote.Client, keys *reapi.Keyer, locals localExecutors, warnAll, warn func(string, ...any)) *remoteSide {
	rc := &cfg.Remote
	rs := &remoteSide{}
	var onFirst func(*remote.Executor, *action.Action)
	if rc.Compiler != "" && conn.ship == nil {
		// (A shipped compiler is the link's own.)
		rs.compilerCheck = remote.NewCompilerCheck(context.Background(), rc.Compiler, warnAll)
		onFirst = rs.compilerCheck.Start
	}
	rs.rex = remote.NewExecutor(client, remote.ExecOptions{
		Compiler: rc.Compiler, Toolchain: conn.ship.Shipped(),
		Platform: rc.Platform, Env: RemoteEnv(env.Getenv),
		Timeout: rc.ExecTimeout, QueueTimeout: rc.QueueTimeout,
		ExecStall: rc.ExecStall, Files: keys.Files,
		// The remote cache above looks every action up and, when the
		// server lets clients write, stores what runs remotely.
		NoLookup: client.ACUpdateEnabled(),
		OnFirst:  onFirst,
		// A race won here is stored in the ActionCache only by the
		// remote execution it beat, where this run does not store it.
		FinishAbandoned: !client.ACUpdateEnabled() || !rc.Upload,
	})
	var rexec executor.Executor = rs.rex
	remoteSlots := rc.Jobs
	if rc.Group > 1 {
		switch {
		case conn.ship != nil:
			// The workers may have no shell at all: the shipped
			// compiler needs none, a group's script does.
			warnAll("--remote-group: a group's command is a /bin/sh script, and with the compiler shipped as inputs " +
				"(--remote-toolchain) the workers need not have a shell; not grouping (--remote-toolchain=installed groups)")
		case client.ACUpdateEnabled():
			// Up to Group times as many actions in flight, grouped
			// into --remote-jobs executions.
			rs.grouper = remote.NewGrouper(rs.rex, slots.NewPool(rc.Jobs), remote.GroupOptions{Max: rc.Group, Warn: warnAll})
			rexec, remoteSlots = rs.grouper, rc.Jobs*rc.Group
		default:
			warnAll("--remote-group: %s does not let clients write its ActionCache, where each grouped "+
				"action's result must go under its own key; not grouping", rc.Target)
		}
	}
	localJobs := rc.LocalJobs
	if localJobs < 0 {
		localJobs = cfg.Jobs
	}
	hopts := dispatch.Options{RemoteSlots: remoteSlots, LocalSlots: localJobs, Races: !rc.NoRace}
	if rs.grouper == nil {
		hopts.UploadTime = rs.rex.UploadTime // Ahead prepares each action's upload
	}
	d := dispatch.NewDispatcher(hopts, locals.procs)
	// What runs here beside the Hybrid (a fallback, an action with side
	// files) asks the Dispatcher for a process slot; what runs here in a
	// slot it granted asks only for make's token.
	local := locals.build(d.Processes(), 0)
	granted := locals.build(d.Granted(), 0)
	// A race's local try is speculative: it runs niced, taking only the
	// CPU that this machine's share of the work (uploads, downloads,
	// hybrid compiles) leaves idle.
	speculative := locals.build(d.Granted(), speculativeNice)
	var ex executor.Executor = executor.Verified(rexec)
	if !rc.NoRace && !rc.NoHedge {
		// The critical actions, which alone bound the link, run on two
		// workers at once, and here as well (the Race below, from the
		// start): one slow worker, or this machine's few busy cores,
		// cannot hold the link. The premium is one more execution of at
		// most one action per local slot, within dispatch.HedgeBudget of
		// the link's work.
		rs.hedge = executor.NewHedge(ex, executor.Verified(rs.rex.SecondWorker()), d.OnTwoWorkers)
		ex = rs.hedge
	}
	if !rc.NoRace {
		ex = executor.Race(ex, speculative, d)
	}
	rs.fb = executor.NewFallback(ex, local, executor.FallbackOptions{
		None: rc.Fallback == "none", What: "remote execution",
		Hint: "--remote-fallback=none: not compiling locally",
		Warn: func(format string, args ...any) { warn(format, args...) },
	})
	rs.hybrid = executor.NewHybrid(d, rs.fb, granted)
	// A command that asks for side files runs here: a worker would write
	// them on its own disk, and they are not outputs it returns.
	var producer executor.Executor = executor.NewLocalFor(rs.hybrid, local, reapi.SideFiles, warnAll)
	if rs.grouper == nil {
		// Right below the remote cache: a cold action's upload goes with
		// its lookup, not after it. (A group's members are uploaded
		// together, as one action.)
		producer = executor.PrepareAhead(producer, rs.rex)
	}
	// In flight: an action per slot, and more per local slot, looked up
	// and waiting in the Hybrid for a free slot (dispatch.InFlight).
	rs.producer, rs.parallel, rs.planner, rs.dispatcher = producer, dispatch.InFlight(remoteSlots, localJobs), d, d
	return rs
}

// newRemote builds the remote part of the chain on conn: the remote cache
// in front of remote execution and this machine (newRemoteSide), or of
// this machine alone with --remote-cache-only.
func newRemote(ctx context.Context, cfg *config.Config, env Env, warnAll func(string, ...any), conn *remoteConn, keys *reapi.Keyer, locals localExecutors) *remoteChain {
	rc := &cfg.Remote
	client := conn.client
	warn := report.Limited(warnAll)
	// Cache only: the remote cache's lookups wait on the network, not on
	// a local slot (dispatch.InFlight with no remote slot).
	rs := &remoteSide{producer: locals.build(locals.procs, 0), parallel: dispatch.InFlight(0, cfg.Jobs)}
	if !conn.cacheOnly {
		rs = newRemoteSide(cfg, env, conn, client, keys, locals, warnAll, warn)
	}
	if !client.ACUpdateEnabled() && !(conn.cacheOnly && !rc.Upload) {
		warnAll("%s does not let clients write its ActionCache (update_enabled=false): results are found by "+
			"their executable action, but those of archive members, whose action changes with every link, are not reused", rc.Target)
	}
	// The shared ActionCache takes results that remote workers produced
	// (or that came from the remote cache), and what this machine compiled
	// (hybrid, races, fallbacks, cache-only mode) unless --remote-upload=false.
	storeFrom := func(w executor.Where) bool {
		switch w {
		case executor.Remote, executor.RemoteCache:
			return true
		}
		return rc.Upload
	}
	// Results are stored while the link goes on, in bursts: one lookup and
	// batched uploads for the objects of all of a burst's results.
	behind := cache.NewWriteBehind(ctx, remote.NewStore(client), cache.WriteBehindOptions{
		Window: storeWindow, BurstBytes: storeBurst, MaxPending: storePending, Warn: warn,
	})
	rcache := cache.NewExecutor(behind, keys, rs.producer, cache.Options{
		Where: executor.RemoteCache, ReadOnly: conn.readOnly, StoreFrom: storeFrom, Warn: warn,
		StoreMessages: !conn.readOnly, Unusable: env.Record.Unusable, Run: env.Record.ID(),
	})
	rch := &remoteChain{chain: executor.Verified(rcache), parallel: rs.parallel, planner: rs.planner,
		side: rs, client: client, rcache: rcache, behind: behind, cpu0: conn.cpu0, notes: conn.notes}
	if !conn.cacheOnly {
		rch.preparing = dispatch.Preparing(client.RTT, runtime.GOMAXPROCS(0))
	}
	return rch
}

// ownCPU is the user and system CPU this process has used: thindist's own
// work, not that of the compilers it waits for.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
