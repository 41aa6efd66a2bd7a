package pipeline

import (
	"fmt"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/remote"
)

// RunStats are the counters of a run's executor chain, read once, at the
// run's end, from the Stats of the chain's parts (chain.stats): what goes
// into the local cache's totals, the record and the remote summary line.
type RunStats struct {
	// Local is the local cache's, nil without one.
	Local *cache.ExecutorStats
	// Remote is the remote chain's, nil without a remote service.
	Remote *remoteStats
}

// stats reads the counters of ch's parts. The remote chain's results
// still to be stored must have been (remoteChain.drain).
func (ch *chain) stats() RunStats {
	var st RunStats
	if ch.cached != nil {
		st.Local = ptr(ch.cached.Stats())
	}
	if ch.remote != nil {
		st.Remote = ptr(ch.remote.stats())
	}
	return st
}

// finish ends ch's run: it stores what the remote cache has left to
// store, reads the counters once (RunStats), adds the local cache's to
// the cache's totals, puts the remote chain's in the record and, unless
// cfg.Quiet, prints the remote summary line, then releases what the chain
// holds.
func (ch *chain) finish(cfg *config.Config, env Env, console *report.Console, tl *report.Timeline, warn func(string, ...any)) {
	if ch.remote != nil {
		ch.remote.drain(tl)
		ch.remote.notes.Remember(cfg.Remote.Target, ch.remote.client.Measured())
	}
	st := ch.stats()
	if c := st.Local; c != nil {
		run := cache.Stats{Hits: c.Hits, Misses: c.Misses, SavedCPU: c.SavedCPU}
		if err := ch.disk.Finish(run, cfg.CacheLimit()); err != nil {
			warn("cache %s: %v", cfg.CacheRoot(env.Getenv), err)
		}
	}
	if r := st.Remote; r != nil {
		if rec := env.Record; rec != nil {
			rec.Update(r.record)
		}
		if !cfg.Quiet {
			console.Printf("%s", r.line(cfg.Remote.Target))
		}
	}
	ch.close()
}

// close releases what ch holds: the remote connection, then what the
// local side holds, the last acquired first.
func (ch *chain) close() {
	if ch.remote != nil {
		ch.remote.client.Close()
	}
	for i := len(ch.release) - 1; i >= 0; i-- {
		ch.release[i]()
	}
}

// drain stores what the remote cache has left to store: the link's work
// too, a phase of its own when it took a while.
func (r *remoteChain) drain(tl *report.Timeline) {
	if r.side != nil && r.side.compilerCheck != nil {
		r.side.compilerCheck.wait()
	}
	start := tl.Now()
	r.behind.Close()
	if now := tl.Now(); now.Sub(start) >= time.Millisecond {
		tl.Add("storing results", start, now)
	}
}

// remoteStats are the counters of a run's remote chain, read once at its
// end, for the record and the summary line.
type remoteStats struct {
	invocation string
	// compression is what --remote-compress=auto chose, and why.
	compression string
	transfers   remote.TransferStats
	cache       cache.ExecutorStats
	stored      cache.WriteBehindStats
	// exec, fallback and hybrid are set with remote execution; hedge and
	// group when those ran.
	exec     *remote.ExecStats
	fallback executor.FallbackStats
	hybrid   executor.HybridStats
	// racedAtStart is how many races of critical actions the Dispatcher
	// started with their remote run.
	racedAtStart int64
	hedge        *executor.HedgeStats
	group        *remote.GroupStats
	// toolchain is set when actions shipped their compiler.
	toolchain *remote.ToolchainStats
	// cpu is thindist's own CPU since it began to connect.
	cpu time.Duration
}

// stats reads the counters of r's parts.
func (r *remoteChain) stats() remoteStats {
	rs := r.side
	st := remoteStats{invocation: r.client.Invocation(), compression: r.client.CompressionChoice(), transfers: r.client.Stats(), cache: r.rcache.Stats(),
		stored: r.behind.Stats(), cpu: ownCPU() - r.cpu0}
	if rs.rex != nil {
		st.exec, st.fallback, st.hybrid = ptr(rs.rex.Stats()), rs.fb.Stats(), rs.hybrid.Stats()
		st.racedAtStart = rs.dispatcher.RacedAtStart()
		if ts := rs.rex.ToolchainStats(); ts.Used {
			st.toolchain = &ts
		}
	}
	if rs.hedge != nil {
		st.hedge = ptr(rs.hedge.Stats())
	}
	if rs.grouper != nil {
		st.group = ptr(rs.grouper.Stats())
	}
	return st
}

// ptr returns a pointer to a copy of v: the counters of a part a run may
// not have.
func ptr[T any](v T) *T { return &v }

// record puts what the run moved and how often it fell back in its record.
func (st remoteStats) record(run *record.Run) {
	// The sums of the actions' BytesUp and BytesDown (executor.Metered),
	// and what failed actions moved.
	run.Invocation, run.Compression = st.invocation, st.compression
	run.BytesUp = st.transfers.BytesUploaded
	run.BytesDown = st.transfers.BytesRead + st.transfers.BytesInlined
	if st.exec != nil {
		run.FellBack = st.fallback.Fallbacks
	}
	if ts := st.toolchain; ts != nil {
		run.Toolchain = &record.Toolchain{Files: ts.Files, Bytes: ts.Bytes, Uploaded: ts.Uploaded, Took: ts.Took}
	}
}

// line is the remote summary line of a run on target.
func (st remoteStats) line(target string) string {
	c, cs := st.transfers, st.cache
	line := fmt.Sprintf("thindist: remote %s (invocation %s): %d cache hits, %d misses", target, st.invocation, cs.Hits, cs.Misses)
	if es := st.exec; es != nil {
		fs, hs := st.fallback, st.hybrid
		line += fmt.Sprintf("; %d executed, %d server cache hits, %d retries, %d ran locally",
			es.Executed, es.ServerCacheHits, es.Retries, fs.Fallbacks+fs.Unsupported)
		line += fmt.Sprintf("; %d uploads begun with their lookup (%d of them not executed here)", es.Ahead, es.AheadUnused)
		line += fmt.Sprintf("; %d compiled here beside the remote, %d raced (%d won here, %d raced from the start)",
			hs.Local, hs.Races, hs.RacesWonHere, st.racedAtStart)
		if gs := st.hedge; gs != nil {
			line += fmt.Sprintf("; %d hedged on a second worker (%d won there)", gs.Hedged, gs.Won)
		}
		if gs := st.group; gs != nil {
			line += fmt.Sprintf("; %d grouped into %d executions (%d sent alone again)", gs.Grouped, gs.Groups, gs.Reruns)
		}
	}
	if ws := st.stored; ws.Results+ws.Failed > 0 {
		line += fmt.Sprintf("; %d results stored in %d bursts", ws.Results, ws.Bursts)
		if ws.Failed > 0 {
			line += fmt.Sprintf(" (%d could not be)", ws.Failed)
		}
	}
	if ts := st.toolchain; ts != nil {
		line += fmt.Sprintf("; toolchain shipped, %d files, %s", ts.Files, mib(ts.Bytes))
		if ts.Uploaded > 0 {
			line += fmt.Sprintf(", %s uploaded in %s", mib(ts.Uploaded), ts.Took.Round(time.Millisecond))
		} else {
			line += " already in the CAS"
		}
	}
	line += fmt.Sprintf("; uploaded %d blobs, %s (%s on the wire) of %s needed",
		c.BlobsUploaded, mib(c.BytesUploaded), mib(c.WireBytesUploaded), mib(c.BytesRequested))
	// thindist's own CPU since it dialled (every RPC, protobuf, hashing
	// and file I/O; not the compilers it ran here), per action that
	// reached the remote cache.
	if n := cs.Hits + cs.Misses; n > 0 {
		line += fmt.Sprintf("; thindist CPU %s, %.2f ms per action", st.cpu.Round(time.Millisecond),
			float64(st.cpu.Microseconds())/1e3/float64(n))
	}
	return line
}
