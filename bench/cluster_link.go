package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/bench/internal/server"
)

// clusterLink runs one link against a simulation server started with c,
// with thindist as lld's distributor behind timewrap.
// With pprof set, the distributor is this program running thindist's code
// under the CPU profiler (-distributor-pprof, profile.go) into that file.
func clusterLink(ctx context.Context, t *tools, o *options, p *project, dir, out string, c server.SimConfig, pprof string, extra ...string) (clusterRun, error) {
	return clusterLinkVia(ctx, t, o, p, dir, out, c, pprof, nil, extra...)
}

// clusterLinkVia is clusterLink with thindist reaching the server through
// via (nil: directly).
func clusterLinkVia(ctx context.Context, t *tools, o *options, p *project, dir, out string, c server.SimConfig, pprof string, via *relay, extra ...string) (clusterRun, error) {
	cfg, err := json.Marshal(c)
	if err != nil {
		return clusterRun{}, err
	}
	execRoot := filepath.Join(dir, "exec")
	os.RemoveAll(execRoot)
	if err := os.MkdirAll(execRoot, 0o755); err != nil {
		return clusterRun{}, err
	}
	srv, err := server.Start(ctx, execRoot, string(cfg))
	if err != nil {
		return clusterRun{}, err
	}
	target := srv.Addr
	if via != nil {
		via.setBackend(srv.Addr)
		target = via.Addr()
	}
	r, err := linkThrough(ctx, t, o, p, dir, out, target, pprof, c.Record || o.clusterTraces, srv.CPU, extra...)
	if err == nil {
		r.stats, _, err = srv.Stats()
	}
	if err == nil {
		var reply server.Reply
		reply, err = srv.Call("stats")
		r.sim = reply.Simulation
	}
	srv.Stop()
	return r, err
}

// backendLinkVia is one link against -cluster-backend, a real REAPI
// endpoint whose workers replay the recording, through via: emptied
// first by -cluster-backend-reset. What moved is counted at the relay
// (down: on the wire) and in thindist's remote summary line (up).
func backendLinkVia(ctx context.Context, t *tools, o *options, p *project, dir, out string, via *relay, extra ...string) (clusterRun, error) {
	if o.clusterBackendReset != "" {
		if b, err := exec.CommandContext(ctx, "sh", "-c", o.clusterBackendReset).CombinedOutput(); err != nil {
			return clusterRun{}, fmt.Errorf("-cluster-backend-reset: %v\n%s", err, b)
		}
	}
	via.setBackend(o.clusterBackend)
	up0, down0 := via.moved()
	extra = append(strings.Fields(o.clusterBackendFlags), extra...)
	r, err := linkThrough(ctx, t, o, p, dir, out, via.Addr(), "", o.clusterTraces, nil, extra...)
	if err != nil {
		return r, err
	}
	up, down := via.moved()
	r.stats.BytesReadRaw = down - down0
	r.stats.BytesUploadedWire = up - up0
	if m := uploadedLine.FindStringSubmatch(r.output); m != nil {
		raw, _ := strconv.ParseFloat(m[1], 64)
		wire, _ := strconv.ParseFloat(m[2], 64)
		r.stats.BytesUploadedRaw, r.stats.BytesUploadedWire = int64(raw*(1<<20)), int64(wire*(1<<20))
	}
	if m := executedLine.FindStringSubmatch(r.output); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.sim.Replayed = n
	}
	return r, nil
}

// What thindist's remote summary line says it uploaded and executed.
var (
	uploadedLine = regexp.MustCompile(`uploaded \d+ blobs, ([0-9.]+) MiB \(([0-9.]+) MiB on the wire\)`)
	executedLine = regexp.MustCompile(`; (\d+) executed, `)
)

// linkThrough links once with thindist as lld's distributor behind
// timewrap, its remote at target; backendCPU, if not nil, is the CPU the
// backend has used so far (it shares this machine's cores).
func linkThrough(ctx context.Context, t *tools, o *options, p *project, dir, out, target, pprof string, trace bool, backendCPU func() time.Duration, extra ...string) (clusterRun, error) {
	var r clusterRun
	wrapRec, tracePath := filepath.Join(dir, "distributor"), filepath.Join(dir, "trace.json")
	os.Remove(wrapRec)
	os.Remove(tracePath)
	dist := []string{t.thindist}
	if pprof != "" {
		self, err := os.Executable()
		if err != nil {
			return r, err
		}
		dist = []string{self, "-distributor-pprof=" + pprof, "--"}
	}
	args := []string{"-fthinlto-distributor=" + t.timewrap, "-Xthinlto-distributor=" + wrapRec}
	for _, a := range dist {
		args = append(args, "-Xthinlto-distributor="+a)
	}
	args = append(args, "-Xthinlto-distributor=--no-cache",
		"-Xthinlto-distributor=--remote=grpc://"+target, "-Xthinlto-distributor=--remote-fallback=none",
		"-Xthinlto-distributor=--remote-toolchain=installed") // as the figures so far
	if trace {
		args = append(args, "-Xthinlto-distributor=--trace="+tracePath)
	}
	for _, e := range extra {
		args = append(args, "-Xthinlto-distributor="+e)
	}
	os.Remove(filepath.Join(p.build.Dir, out))
	machine.WaitQuiet(ctx, o.maxBusy, o.settle)
	var cpu0 time.Duration
	if backendCPU != nil {
		cpu0 = backendCPU()
	}
	steal0 := machine.Stolen()
	tm, err := timed(ctx, p.build.Dir, nil, t.tc.Clang, p.build.LinkArgs(out, args...)...)
	if backendCPU != nil {
		r.server = backendCPU() - cpu0
	}
	r.steal = machine.Stolen() - steal0
	if r.server > 0 && tm.wall > 0 {
		tm.others = max(0, tm.others-float64(r.server)/(float64(tm.wall)*float64(runtime.NumCPU())))
	}
	if err == nil {
		err = p.check(ctx, filepath.Join(p.build.Dir, out))
	}
	if err != nil {
		return r, err
	}
	w, err := readWrapRecord(wrapRec)
	if err != nil {
		return r, err
	}
	if !w.ran {
		return r, fmt.Errorf("lld did not run the distributor")
	}
	r.wall, r.dist, r.self, r.selfSystem, r.others = tm.wall, w.wall, w.self, w.selfSystem, tm.others
	r.summary = jobsSummary.FindString(string(tm.output))
	r.output = string(tm.output)
	// The link's whole output (thindist's summary and warnings, lld's) of
	// the latest link, to look at.
	os.WriteFile(filepath.Join(dir, "link-output.txt"), tm.output, 0o644)
	return r, nil
}

var jobsSummary = regexp.MustCompile(`(?m)^thindist: (?:.*: )?\d+ jobs, .*$`)

// localBackends are the wall times of the backends thindist ran on this
// machine, from its trace.
func localBackends(trace string) ([]time.Duration, error) {
	backends, err := tracedBackends(trace)
	var ds []time.Duration
	for _, e := range backends {
		if e.where == "local" {
			ds = append(ds, e.wall)
		}
	}
	return ds, err
}
