package pipeline

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/reapi"
	"github.com/thindist/thindist/internal/record"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/report"
)

// remoteChain is the remote part of the executor chain.
type remoteChain struct {
	chain     executor.Executor
	parallel  int
	preparing int // schedule.Options.Preparing
	planner   executor.Planner
	finish    func(quiet bool)
}

// Preparing is how many actions prepare at once on a remote chain
// (schedule.Options.Preparing) over a service with this round-trip time:
// enough for this machine's cores to stay busy while each waits out the
// round trips of its preparation (the ActionCache lookup,
// FindMissingBlobs, the upload, and one to spare) at about
// preparingCPU each, and no fewer than minPreparing: with every action
// preparing at once the first executions begin late, and with too few
// over a distant service the cluster starves (docs/architecture.md, "How
// many actions prepare at once").
func Preparing(rtt time.Duration, cores int) int {
	const (
		roundTrips   = 4
		preparingCPU = time.Millisecond
		minPreparing = 32
	)
	return max(minPreparing, cores*(1+int(roundTrips*rtt/preparingCPU)))
}

// RemoteOptions turns the configuration into the client's options.
func RemoteOptions(r *config.Remote) remote.Options {
	compress := remote.CompressDownloads
	switch r.Compress {
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

// localAhead is how many actions per local slot a Hybrid keeps ready
// beyond those running: looked up in the caches, waiting for a slot.
const localAhead = 2

// The remote cache's results are stored in bursts (cache.WriteBehind): a
// burst gathers what ends within storeWindow, or storeBurst bytes of
// objects; at most storePending bytes wait in memory, and a larger object
// is stored by its action, as it ends.
const (
	storeWindow  = 50 * time.Millisecond
	storeBurst   = 4 << 20
	storePending = 64 << 20
)

// newRemote connects to the service and builds
// Verified(remotecache(Hybrid(Fallback(Race(Verified(remote), speculative), local), local))),
// or with --remote-cache-only Verified(remotecache(local)).
//
// A service that a link found unreachable within unreachableFor is not
// tried (unless --remote-fallback=none); one found unreachable now, or
// down mid-link, is marked so in the cache directory dir, and one reached
// has its mark cleared.
func newRemote(ctx context.Context, cfg *config.Config, env Env, console *report.Console, warnAll func(string, ...any), keys *reapi.Keyer, local, speculative executor.Executor, tl *report.Timeline, dir string) (*remoteChain, error) {
	rc := &cfg.Remote
	if rc.Fallback != "none" {
		if err := skipRemote(dir, rc.Target, time.Now()); err != nil {
			return nil, err
		}
	}
	cpu0 := ownCPU()
	opts := RemoteOptions(rc)
	endConnect := tl.Begin("connecting") // or waiting for the dial begun before the run
	var client *remote.Client
	var err error
	if env.Dialing.claim(opts) {
		client, err = env.Dialing.wait(ctx)
	} else {
		client, err = dial(ctx, opts)
	}
	endConnect()
	if err != nil {
		if remote.Unreachable(err) {
			markUnreachable(dir, rc.Target, time.Now())
		}
		return nil, err
	}
	clearUnreachable(dir, rc.Target)
	client.OnDown(func(err error) {
		markUnreachable(dir, rc.Target, time.Now())
		warnAll("%v: not using it for the rest of this link; the remaining actions compile here, and their results are not stored there", err)
	})
	warn := limited(warnAll)
	cacheOnly := rc.CacheOnly
	if !cacheOnly && !client.ExecEnabled() {
		warnAll("%s offers no remote execution; using it as a cache only", rc.Target)
		cacheOnly = true
	}
	remoteKeys(keys, rc, !cacheOnly)
	// The remote cache's lookups wait on the network, not on a local
	// slot: as many actions as the local slots, and localAhead more per
	// slot, are in flight, so that the lookups do not keep the local
	// slots idle (and a service that stops answering holds none of them).
	producer, parallel := local, cfg.Jobs*(1+localAhead)
	var planner executor.Planner
	var rex *remote.Executor
	var fb *executor.Fallback
	var hybrid *executor.Hybrid
	var hedge *executor.Hedge
	var grouper *remote.Grouper
	if !cacheOnly {
		rex = remote.NewExecutor(client, remote.ExecOptions{
			Compiler: rc.Compiler, Platform: rc.Platform, Env: RemoteEnv(env.Getenv),
			Timeout: rc.ExecTimeout, QueueTimeout: rc.QueueTimeout,
			ExecStall: rc.ExecStall, Files: keys.Files,
			// The remote cache below looks every action up and, when the
			// server lets clients write, stores what runs remotely.
			NoLookup: client.ACUpdateEnabled(),
		})
		var rexec executor.Executor = rex
		remoteSlots := rc.Jobs
		if rc.Group > 1 {
			if client.ACUpdateEnabled() {
				// Up to Group times as many actions in flight, grouped
				// into --remote-jobs executions.
				grouper = remote.NewGrouper(rex, remote.GroupOptions{Max: rc.Group, Slots: rc.Jobs, Warn: warnAll})
				rexec, remoteSlots = grouper, rc.Jobs*rc.Group
			} else {
				warnAll("--remote-group: %s does not let clients write its ActionCache, where each grouped "+
					"action's result must go under its own key; not grouping", rc.Target)
			}
		}
		localJobs := rc.LocalJobs
		if localJobs < 0 {
			localJobs = cfg.Jobs
		}
		// The slots and the plan first; the executors that use them
		// after.
		slots := executor.NewDispatcher(executor.HybridOptions{RemoteSlots: remoteSlots, LocalSlots: localJobs, Races: !rc.NoRace})
		var remoteSide executor.Executor = executor.Verified(rexec)
		if !rc.NoRace && !rc.NoHedge {
			// The critical actions, which alone bound the link, run on
			// two workers at once, and here as well (the Race below,
			// from the start): one slow worker, or this machine's few
			// busy cores, cannot hold the link. The premium is one more
			// execution of at most one action per local slot, within
			// executor.HedgeBudget of the link's work.
			hedge = executor.NewHedge(remoteSide, executor.Verified(rex.SecondWorker()), slots.OnTwoWorkers)
			remoteSide = hedge
		}
		if !rc.NoRace {
			remoteSide = executor.Race(remoteSide, speculative, slots)
		}
		fb = executor.NewFallback(remoteSide, local, executor.FallbackOptions{
			None: rc.Fallback == "none", What: "remote execution",
			Hint: "--remote-fallback=none: not compiling locally",
			Warn: func(format string, args ...any) { warn(format, args...) },
		})
		hybrid = executor.NewHybrid(slots, fb, local)
		// In flight: an action per slot, and localAhead more per local
		// slot, looked up and waiting in the Hybrid for a free slot.
		// Without them a local slot that frees stays idle while the next
		// action computes its key and waits a round trip for the remote
		// cache (docs/architecture.md, "Actions kept ready beyond the
		// slots").
		producer, parallel, planner = hybrid, remoteSlots+localJobs*(1+localAhead), slots
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
	readOnly := cacheOnly && !rc.Upload
	if !client.ACUpdateEnabled() && !readOnly {
		readOnly = true
		warnAll("%s does not let clients write its ActionCache (update_enabled=false): results are found by "+
			"their executable action, but those of archive members, whose action changes with every link, are not reused", rc.Target)
	}
	var ahead func(context.Context, executor.Job) func()
	if rex != nil && grouper == nil {
		// A cold action's upload goes with its lookup, not after it. (A
		// group's members are uploaded together, as one action.)
		ahead = rex.Ahead
	}
	// Results are stored while the link goes on, in bursts: one lookup and
	// batched uploads for the objects of all of a burst's results.
	behind := cache.NewWriteBehind(ctx, remote.NewStore(client), cache.WriteBehindOptions{
		Window: storeWindow, BurstBytes: storeBurst, MaxPending: storePending, Warn: warn,
	})
	// Each entry goes with its canonical Action and Command (REAPI: a
	// client writing the ActionCache puts them in the CAS first); the
	// bursts carry them at the cost of their bytes.
	keys.KeepMessages = !readOnly
	rcache := cache.NewExecutor(behind, keys, producer, cache.Options{
		Where: executor.RemoteCache, ReadOnly: readOnly, StoreFrom: storeFrom, Warn: warn, Ahead: ahead,
		StoreMessages: !readOnly, Unusable: env.Record.Unusable, Run: env.Record.ID(),
	})
	finish := func(quiet bool) {
		defer client.Close()
		// What was left to store is the link's too: a phase of its own
		// when it took a while.
		start := tl.Now()
		behind.Close()
		if now := tl.Now(); now.Sub(start) >= time.Millisecond {
			tl.Add("storing results", start, now)
		}
		if rec := env.Record; rec != nil {
			rec.Update(func(run *record.Run) {
				// The sums of the actions' BytesUp and BytesDown
				// (executor.Metered), and what failed actions moved.
				c := client.Stats()
				run.Invocation = client.Invocation()
				run.BytesUp = c.BytesUploaded
				run.BytesDown = c.BytesRead + c.BytesInlined
				if fb != nil {
					run.FellBack = fb.Stats().Fallbacks
				}
			})
		}
		if quiet {
			return
		}
		c, cs := client.Stats(), rcache.Stats()
		line := fmt.Sprintf("thindist: remote %s (invocation %s): %d cache hits, %d misses", rc.Target, client.Invocation(), cs.Hits, cs.Misses)
		if rex != nil {
			es, fs, hs := rex.Stats(), fb.Stats(), hybrid.Stats()
			line += fmt.Sprintf("; %d executed, %d server cache hits, %d retries, %d ran locally",
				es.Executed, es.ServerCacheHits, es.Retries, fs.Fallbacks+fs.Unsupported)
			line += fmt.Sprintf("; %d uploads begun with their lookup (%d of them not executed here)", es.Ahead, es.AheadUnused)
			line += fmt.Sprintf("; %d compiled here beside the remote, %d raced (%d won here, %d raced from the start)",
				hs.Local, hs.Races, hs.RacesWonHere, hs.RacedAtStart)
			if hedge != nil {
				gs := hedge.Stats()
				line += fmt.Sprintf("; %d hedged on a second worker (%d won there)", gs.Hedged, gs.Won)
			}
			if grouper != nil {
				gs := grouper.Stats()
				line += fmt.Sprintf("; %d grouped into %d executions (%d sent alone again)", gs.Grouped, gs.Groups, gs.Reruns)
			}
		}
		if ws := behind.Stats(); ws.Results+ws.Failed > 0 {
			line += fmt.Sprintf("; %d results stored in %d bursts", ws.Results, ws.Bursts)
			if ws.Failed > 0 {
				line += fmt.Sprintf(" (%d could not be)", ws.Failed)
			}
		}
		line += fmt.Sprintf("; uploaded %d blobs, %s (%s on the wire) of %s needed",
			c.BlobsUploaded, mib(c.BytesUploaded), mib(c.WireBytesUploaded), mib(c.BytesRequested))
		// thindist's own CPU since it dialled (every RPC, protobuf,
		// hashing and file I/O; not the compilers it ran here), per action
		// that reached the remote cache.
		if n := cs.Hits + cs.Misses; n > 0 {
			cpu := ownCPU() - cpu0
			line += fmt.Sprintf("; thindist CPU %s, %.2f ms per action", cpu.Round(time.Millisecond),
				float64(cpu.Microseconds())/1e3/float64(n))
		}
		console.Printf("%s", line)
	}
	rch := &remoteChain{chain: executor.Verified(rcache), parallel: parallel, planner: planner, finish: finish}
	if !cacheOnly {
		rch.preparing = Preparing(client.RTT, runtime.GOMAXPROCS(0))
	}
	return rch, nil
}

// remoteKeys makes keys those of actions that may run on rc's workers
// (exec: remote execution is in use): the workers' compiler and platform
// are part of every key.
func remoteKeys(keys *reapi.Keyer, rc *config.Remote, exec bool) {
	if rc.Compiler != "" {
		localID := keys.CompilerID
		keys.CompilerID = func(path string) (string, error) {
			id, err := localID(path)
			return id + "\x00remote-compiler=" + rc.Compiler, err
		}
	}
	if exec {
		keys.Platform = reapi.Platform(rc.Platform)
	}
}

// allCached reports whether the local cache has the result of every
// action, under the keys the remote configuration gives them (the
// service offering remote execution unless rc says cache only), so that
// the link need not connect to the service at all: a fully cached link
// does not wait for it, nor stall when it is down. keys is left as it is.
func allCached(ctx context.Context, disk *cache.Disk, keys *reapi.Keyer, rc *config.Remote, actions []*action.Action) bool {
	probe := &reapi.Keyer{Files: keys.Files, CompilerID: keys.CompilerID, Getenv: keys.Getenv}
	remoteKeys(probe, rc, !rc.CacheOnly)
	for _, a := range actions {
		key, _, err := probe.KeyShard(a)
		if err != nil {
			return false
		}
		if _, err := disk.GetActionResult(ctx, key, nil); err != nil {
			return false
		}
	}
	return true
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

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
