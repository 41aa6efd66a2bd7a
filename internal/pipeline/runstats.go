package pipeline

import (
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/report"
)

// RunStats are the counters of a run's executor chain, read once, at the
// run's end, from the Stats of the chain's parts (chain.stats): what goes
// into the local cache's totals, the record and the remote summary line.
type RunStats struct {
	// Local is the local cache's, nil without one.
	Local *cache.ExecutorStats
	// Remote is the remote chain's, nil without a remote service.
	Remote *report.RemoteStats
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
			rec.Update(func(run *record.Run) { recordRemote(r, run) })
		}
		if !cfg.Quiet {
			console.Printf("%s", r.Line(cfg.Remote.Target))
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
		r.side.compilerCheck.Wait()
	}
	start := tl.Now()
	r.behind.Close()
	if now := tl.Now(); now.Sub(start) >= time.Millisecond {
		tl.Add("storing results", start, now)
	}
}

// stats reads the counters of r's parts.
func (r *remoteChain) stats() report.RemoteStats {
	rs := r.side
	st := report.RemoteStats{Invocation: r.client.Invocation(), Compression: r.client.CompressionChoice(), Transfers: r.client.Stats(), Cache: r.rcache.Stats(),
		Stored: r.behind.Stats(), CPU: ownCPU() - r.cpu0}
	if rs.rex != nil {
		st.Exec, st.Fallback, st.Hybrid = ptr(rs.rex.Stats()), rs.fb.Stats(), rs.hybrid.Stats()
		st.RacedAtStart = rs.dispatcher.RacedAtStart()
		if ts := rs.rex.ToolchainStats(); ts.Used {
			st.Toolchain = &ts
		}
	}
	if rs.hedge != nil {
		st.Hedge = ptr(rs.hedge.Stats())
	}
	if rs.grouper != nil {
		st.Group = ptr(rs.grouper.Stats())
	}
	return st
}

// ptr returns a pointer to a copy of v: the counters of a part a run may
// not have.
func ptr[T any](v T) *T { return &v }

// recordRemote puts what the run moved and how often it fell back, of
// st, in its record.
func recordRemote(st *report.RemoteStats, run *record.Run) {
	// The sums of the actions' BytesUp and BytesDown (executor.Metered),
	// and what failed actions moved.
	run.Invocation, run.Compression = st.Invocation, st.Compression
	run.BytesUp = st.Transfers.BytesUploaded
	run.BytesDown = st.Transfers.BytesRead + st.Transfers.BytesInlined
	if st.Exec != nil {
		run.FellBack = st.Fallback.Fallbacks
	}
	if ts := st.Toolchain; ts != nil {
		run.Toolchain = &record.Toolchain{Files: ts.Files, Bytes: ts.Bytes, Uploaded: ts.Uploaded, Took: ts.Took}
	}
}
