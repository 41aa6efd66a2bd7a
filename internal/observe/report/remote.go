package report

import (
	"fmt"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
)

// RemoteStats are the counters of a run's remote chain, read once at its
// end, for the record and the remote summary line (Line).
type RemoteStats struct {
	Invocation string
	// Compression is what --remote-compress=auto chose, and why.
	Compression string
	Transfers   remote.TransferStats
	Cache       cache.ExecutorStats
	Stored      cache.WriteBehindStats
	// Exec, Fallback and Hybrid are set with remote execution; Hedge and
	// Group when those ran.
	Exec     *remote.ExecStats
	Fallback executor.FallbackStats
	Hybrid   executor.HybridStats
	// RacedAtStart is how many races of critical actions the Dispatcher
	// started with their remote run.
	RacedAtStart int64
	Hedge        *executor.HedgeStats
	Group        *remote.GroupStats
	// Toolchain is set when actions shipped their compiler.
	Toolchain *remote.ToolchainStats
	// CPU is thindist's own CPU since it began to connect.
	CPU time.Duration
}

// Line is the remote summary line of a run on target.
func (st RemoteStats) Line(target string) string {
	c, cs := st.Transfers, st.Cache
	line := fmt.Sprintf("thindist: remote %s (invocation %s): %d cache hits, %d misses", target, st.Invocation, cs.Hits, cs.Misses)
	if es := st.Exec; es != nil {
		fs, hs := st.Fallback, st.Hybrid
		line += fmt.Sprintf("; %d executed, %d server cache hits, %d retries, %d ran locally",
			es.Executed, es.ServerCacheHits, es.Retries, fs.Fallbacks+fs.Unsupported)
		line += fmt.Sprintf("; %d uploads begun with their lookup (%d of them not executed here)", es.Ahead, es.AheadUnused)
		line += fmt.Sprintf("; %d compiled here beside the remote, %d raced (%d won here, %d raced from the start)",
			hs.Local, hs.Races, hs.RacesWonHere, st.RacedAtStart)
		if gs := st.Hedge; gs != nil {
			line += fmt.Sprintf("; %d hedged on a second worker (%d won there)", gs.Hedged, gs.Won)
		}
		if gs := st.Group; gs != nil {
			line += fmt.Sprintf("; %d grouped into %d executions (%d sent alone again)", gs.Grouped, gs.Groups, gs.Reruns)
		}
	}
	if ws := st.Stored; ws.Results+ws.Failed > 0 {
		line += fmt.Sprintf("; %d results stored in %d bursts", ws.Results, ws.Bursts)
		if ws.Failed > 0 {
			line += fmt.Sprintf(" (%d could not be)", ws.Failed)
		}
	}
	if ts := st.Toolchain; ts != nil {
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
		line += fmt.Sprintf("; thindist CPU %s, %.2f ms per action", st.CPU.Round(time.Millisecond),
			float64(st.CPU.Microseconds())/1e3/float64(n))
	}
	return line
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
