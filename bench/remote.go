package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/bench/internal/server"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Issue 4's figures, against the in-repo REAPI test double
// (internal/testsupport/reapitest, the server the e2e tests use, with zstd) on loopback,
// in a process of its own (bench/internal/server):
// thindist as lld's DTLTO distributor with --remote and no local cache. Each
// repetition starts a fresh server: the cold link executes every backend
// remotely; then the warm relink runs from a copy of the build directory
// elsewhere (same relative paths) and should find every result in the
// server's ActionCache; a second warm relink does the same with the server
// inlining outputs in GetActionResult (as BuildBuddy does; the first is the
// case of servers that never inline). The server's "workers" run on this machine, so cold
// remote vs local measures the protocol's overhead on one box, not a
// cluster's speed-up.

type remoteRun struct {
	cold, warm, warmInline                timing
	coldStats, warmStats, warmInlineStats reapitest.Stats
	distinctBytes                         int64 // sum of the sizes of the distinct blobs uploaded in the cold link
	distinctBlobs                         int
	coldSummary, warmSummary              string
}

type remoteResult struct {
	remoteJobs int
	runs       []remoteRun
}

var remoteSummary = regexp.MustCompile(`(?m)^thindist: remote .*$`)

// clientCPU reads thindist's own CPU per action from its remote summary
// line (getrusage of the thindist process: every RPC, protobuf, hash and
// file write; the test double runs in a process of its own).
var clientCPU = regexp.MustCompile(`thindist CPU \S+, ([\d.]+) ms per action`)

// cpuPerAction is the figure clientCPU reads from summary, or "?".
func cpuPerAction(summary string) string {
	if m := clientCPU.FindStringSubmatch(summary); m != nil {
		return m[1] + " ms"
	}
	return "?"
}

func rpcs(st reapitest.Stats) int64 {
	var n int64
	for m, c := range st.RPCs {
		if m != reapitest.MethodGetCapabilities {
			n += c
		}
	}
	return n
}

func benchRemote(ctx context.Context, t *tools, o *options, p *project) (*remoteResult, error) {
	b := p.build
	elsewhere := filepath.Join(b.Dir, "..", "elsewhere", filepath.Base(b.Dir))
	os.RemoveAll(filepath.Dir(elsewhere))
	if err := os.MkdirAll(elsewhere, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", b.Dir+"/.", elsewhere).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cp: %v\n%s", err, out)
	}
	defer os.RemoveAll(filepath.Dir(elsewhere))
	res := &remoteResult{remoteJobs: o.remoteJobs}
	for run := 0; run < o.remoteRuns; run++ {
		r, err := remoteRunOnce(ctx, t, o, p, elsewhere)
		if err != nil {
			return nil, err
		}
		res.runs = append(res.runs, r)
		fmt.Fprintf(os.Stderr, "bench: %s remote run %d: cold %.3f s (%d executions, %d B uploaded, %d distinct), warm %.3f s (%d executions), warm with inlining %.3f s (%d executions)\n",
			b.Name, run+1, r.cold.wall.Seconds(), r.coldStats.Executions, r.coldStats.BytesUploadedRaw, r.distinctBytes,
			r.warm.wall.Seconds(), r.warmStats.Executions, r.warmInline.wall.Seconds(), r.warmInlineStats.Executions)
	}
	return res, nil
}

// remoteRunOnce starts a test server and links p through it three times:
// cold from p's directory, warm from the copy in elsewhere (another path,
// the same objects), and warm again with the server inlining outputs in
// its results.
func remoteRunOnce(ctx context.Context, t *tools, o *options, p *project, elsewhere string) (remoteRun, error) {
	b := p.build
	out := "bench-remote.out"
	var r remoteRun
	execRoot := filepath.Join(o.work, "reapi-exec")
	os.RemoveAll(execRoot)
	if err := os.MkdirAll(execRoot, 0o755); err != nil {
		return r, err
	}
	srv, err := server.Start(ctx, execRoot, "")
	if err != nil {
		return r, err
	}
	defer srv.Stop()
	link := func(dir string, extra ...string) (timing, error) {
		// Every action remote (no hybrid local side): this part
		// measures the protocol.
		args := []string{"-fthinlto-distributor=" + t.thindist, "-Xthinlto-distributor=--no-cache",
			"-Xthinlto-distributor=--remote=grpc://" + srv.Addr, "-Xthinlto-distributor=--remote-fallback=none",
			"-Xthinlto-distributor=--remote-local-jobs=0",
			// The figures so far are of the workers' installed
			// compiler; installed vs inputs is a comparison yet to write.
			"-Xthinlto-distributor=--remote-toolchain=installed"}
		for _, e := range extra {
			args = append(args, "-Xthinlto-distributor="+e)
		}
		os.Remove(filepath.Join(dir, out))
		machine.WaitQuiet(ctx, o.maxBusy, o.settle)
		// The server and its workers are the benchmark's: their CPU
		// is not other processes'.
		srv0 := srv.CPU()
		tm, err := timed(ctx, dir, nil, t.tc.Clang, b.LinkArgs(out, args...)...)
		if srvCPU := srv.CPU() - srv0; srvCPU > 0 && tm.wall > 0 {
			tm.others = max(0, tm.others-float64(srvCPU)/(float64(tm.wall)*float64(runtime.NumCPU())))
		}
		tm.interference = tm.others
		if err == nil {
			err = p.check(ctx, filepath.Join(dir, out))
		}
		return tm, err
	}
	r.cold, err = link(b.Dir, fmt.Sprintf("--remote-jobs=%d", o.remoteJobs))
	if err != nil {
		return r, fmt.Errorf("cold remote link: %w", err)
	}
	var uploads []reapitest.UploadRecord
	if r.coldStats, uploads, err = srv.Stats(); err != nil {
		return r, err
	}
	seen := map[string]bool{}
	for _, u := range uploads {
		if !seen[u.Hash] {
			seen[u.Hash] = true
			r.distinctBytes += u.SizeBytes
		}
	}
	r.distinctBlobs = len(seen)
	r.coldSummary = remoteSummary.FindString(string(r.cold.output))
	if _, err := srv.Call("reset"); err != nil {
		return r, err
	}
	r.warm, err = link(elsewhere)
	if err == nil {
		r.warmStats, _, err = srv.Stats()
	}
	if err != nil {
		return r, fmt.Errorf("warm remote relink: %w", err)
	}
	if _, err := srv.Call("reset"); err == nil {
		_, err = srv.Call("inline")
	}
	if err == nil {
		r.warmInline, err = link(elsewhere)
	}
	if err == nil {
		r.warmInlineStats, _, err = srv.Stats()
	}
	if err != nil {
		return r, fmt.Errorf("warm remote relink, server inlining outputs: %w", err)
	}
	r.warmSummary = remoteSummary.FindString(string(r.warm.output))
	r.cold.output, r.warm.output, r.warmInline.output = nil, nil, nil
	return r, nil
}

func (r *remoteResult) colds() []time.Duration {
	var d []time.Duration
	for _, x := range r.runs {
		d = append(d, x.cold.wall)
	}
	return d
}

func (r *remoteResult) warms() []time.Duration {
	var d []time.Duration
	for _, x := range r.runs {
		d = append(d, x.warm.wall)
	}
	return d
}

func (r *remoteResult) warmsInline() []time.Duration {
	var d []time.Duration
	for _, x := range r.runs {
		d = append(d, x.warmInline.wall)
	}
	return d
}

// rpcBreakdown lists the calls per method, short names, sorted.
func rpcBreakdown(st reapitest.Stats) string {
	var parts []string
	for m, c := range st.RPCs {
		parts = append(parts, fmt.Sprintf("%s %d", m[strings.LastIndex(m, "/")+1:], c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
