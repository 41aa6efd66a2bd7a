package report

import (
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
)

// TestRemoteLine: the remote summary line says what the cache, remote
// execution, the write-behind, the shipped toolchain and the transfers
// did, and leaves out the parts a run did not have.
func TestRemoteLine(t *testing.T) {
	st := RemoteStats{Invocation: "inv", Cache: cache.ExecutorStats{Hits: 3, Misses: 1},
		Transfers: remote.TransferStats{BlobsUploaded: 2, BytesUploaded: 1 << 20, WireBytesUploaded: 1 << 19, BytesRequested: 2 << 20},
		CPU:       40 * time.Millisecond}
	line := st.Line("grpc://h:1")
	for _, want := range []string{"thindist: remote grpc://h:1 (invocation inv): 3 cache hits, 1 misses; uploaded 2 blobs, 1.00 MiB (0.50 MiB on the wire) of 2.00 MiB needed",
		"; thindist CPU 40ms, 10.00 ms per action"} {
		if !strings.Contains(line, want) {
			t.Errorf("cache only: %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "executed") || strings.Contains(line, "stored") || strings.Contains(line, "toolchain") {
		t.Errorf("cache only: %q names a part the run did not have", line)
	}

	st.Exec = &remote.ExecStats{Executed: 1, Retries: 2}
	st.Fallback = executor.FallbackStats{Fallbacks: 1}
	st.Hedge = &executor.HedgeStats{Hedged: 1, Won: 1}
	st.Stored = cache.WriteBehindStats{Results: 4, Bursts: 2, Failed: 1}
	st.Toolchain = &remote.ToolchainStats{Files: 5, Bytes: 3 << 20}
	line = st.Line("grpc://h:1")
	for _, want := range []string{"; 1 executed, 0 server cache hits, 2 retries, 1 ran locally", "; 1 hedged on a second worker (1 won there)",
		"; 4 results stored in 2 bursts (1 could not be)", "; toolchain shipped, 5 files, 3.00 MiB already in the CAS"} {
		if !strings.Contains(line, want) {
			t.Errorf("remote execution: %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "grouped") {
		t.Errorf("%q names grouping, which did not run", line)
	}
}
