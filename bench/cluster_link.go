package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
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
	var r clusterRun
	cfg, err := json.Marshal(c)
	if err != nil {
		return r, err
	}
	execRoot := filepath.Join(dir, "exec")
	os.RemoveAll(execRoot)
	if err := os.MkdirAll(execRoot, 0o755); err != nil {
		return r, err
	}
	srv, err := server.Start(ctx, execRoot, string(cfg))
	if err != nil {
		return r, err
	}
	target := srv.Addr
	if via != nil {
		via.setBackend(srv.Addr)
		target = via.Addr()
	}
	wrapRec, trace := filepath.Join(dir, "distributor"), filepath.Join(dir, "trace.json")
	os.Remove(wrapRec)
	os.Remove(trace)
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
	if c.Record || o.clusterTraces {
		args = append(args, "-Xthinlto-distributor=--trace="+trace)
	}
	for _, e := range extra {
		args = append(args, "-Xthinlto-distributor="+e)
	}
	os.Remove(filepath.Join(p.build.Dir, out))
	machine.WaitQuiet(ctx, o.maxBusy, o.settle)
	srv0, steal0 := srv.CPU(), machine.Stolen()
	tm, err := timed(ctx, p.build.Dir, nil, t.tc.Clang, p.build.LinkArgs(out, args...)...)
	srvCPU := srv.CPU() - srv0
	r.steal = machine.Stolen() - steal0
	if srvCPU > 0 && tm.wall > 0 {
		tm.others = max(0, tm.others-float64(srvCPU)/(float64(tm.wall)*float64(runtime.NumCPU())))
	}
	r.server = srvCPU
	if err == nil {
		err = p.check(ctx, filepath.Join(p.build.Dir, out))
	}
	if err == nil {
		r.stats, _, err = srv.Stats()
	}
	if err == nil {
		var reply server.Reply
		reply, err = srv.Call("stats")
		r.sim = reply.Simulation
	}
	srv.Stop()
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
