package e2e

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/reapitest"
	"github.com/thindist/thindist/internal/testprog"
)

// TestRemoteBench measures remote links against the test double on
// loopback (THINDIST_BENCH=1; THINDIST_BENCH_MODULES sets the size): bytes
// uploaded per distinct byte needed, round trips per action, a cold remote
// link against a local one, and a warm relink from another directory
// against the cold one.
func TestRemoteBench(t *testing.T) {
	if os.Getenv("THINDIST_BENCH") == "" {
		t.Skip("set THINDIST_BENCH=1")
	}
	n, _ := strconv.Atoi(os.Getenv("THINDIST_BENCH_MODULES"))
	if n == 0 {
		n = 200
	}
	p := program(t, testprog.Options{Modules: n, ArchiveModules: n / 10, Seed: 3})
	timed := func(q *testprog.Program, args ...string) (time.Duration, string) {
		os.Remove(q.Dir + "/prog-dtlto")
		l := linkCmd{p: q, objs: q.Objects, out: "prog-dtlto", dist: thindist, distArgs: append([]string{"--no-cache"}, args...)}
		start := time.Now()
		stderr := l.mustLink(t)
		d := time.Since(start)
		if got := runProg(t, q, "prog-dtlto"); got != q.Want {
			t.Fatalf("wrong program")
		}
		return d, stderr
	}
	local, _ := timed(copyProgram(t, p))
	// THINDIST_BENCH_INLINE=1: the server inlines outputs in Execute and
	// GetActionResult responses, as BuildBuddy does (Buildbarn does not).
	srv, addr := fakeRemote(t, reapitest.Options{Zstd: true, InlineOutputs: os.Getenv("THINDIST_BENCH_INLINE") != ""})
	remoteJobs := "--remote-jobs=50"
	if j := os.Getenv("THINDIST_BENCH_REMOTE_JOBS"); j != "" {
		remoteJobs = "--remote-jobs=" + j
	}
	cold, coldErr := timed(copyProgram(t, p), "--remote=grpc://"+addr, "--remote-fallback=none", remoteOnly, remoteJobs)
	st := srv.Stats()
	rpcs := int64(0)
	for m, c := range st.RPCs {
		if m != reapitest.MethodGetCapabilities {
			rpcs += c
		}
	}
	srv.ResetStats()
	warm, warmErr := timed(copyProgram(t, p), "--remote=grpc://"+addr, "--remote-fallback=none", remoteOnly)
	wst := srv.Stats()
	wrpcs := int64(0)
	for m, c := range wst.RPCs {
		if m != reapitest.MethodGetCapabilities {
			wrpcs += c
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "program: %d modules (%d in a static archive), clang 22, test double on loopback, zstd downloads\n", n, n/10)
	fmt.Fprintf(&b, "local link (--jobs = all CPUs, no cache): %v\n", local.Round(time.Millisecond))
	fmt.Fprintf(&b, "%s; this machine has %d CPUs, shared by thindist, lld and the test double's workers\n", remoteJobs, runtime.NumCPU())
	fmt.Fprintf(&b, "cold remote link: %v (%.2fx local); %d executions\n", cold.Round(time.Millisecond), float64(cold)/float64(local), st.Executions)
	fmt.Fprintf(&b, "  %s\n", firstMatch(coldErr))
	fmt.Fprintf(&b, "  bytes uploaded (raw) %d, on the wire %d, blobs %d\n", st.BytesUploadedRaw, st.BytesUploadedWire, st.BlobsUploaded)
	fmt.Fprintf(&b, "  round trips: %d RPCs for %d actions = %.2f per action: %v\n", rpcs, n, float64(rpcs)/float64(n), st.RPCs)
	fmt.Fprintf(&b, "warm relink from another directory: %v (%.3fx cold); %d executions, %d blobs uploaded\n",
		warm.Round(time.Millisecond), float64(warm)/float64(cold), wst.Executions, wst.BlobsUploaded)
	fmt.Fprintf(&b, "  %s\n", firstMatch(warmErr))
	fmt.Fprintf(&b, "  round trips: %.2f per action: %v\n", float64(wrpcs)/float64(n), wst.RPCs)
	t.Logf("\n%s", b.String())
	if f := os.Getenv("THINDIST_BENCH_OUT"); f != "" {
		os.WriteFile(f, []byte(b.String()), 0o644)
	}
}
