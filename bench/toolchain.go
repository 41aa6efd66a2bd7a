package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/bench/internal/server"
	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Issue 49's figures for the compiler shipped as inputs
// (--remote-toolchain=inputs, docs/remote-toolchain.md) against the
// workers' installed compiler, on the in-repo REAPI test double with real
// workers, in processes of their own (bench/internal/server). One test
// double cannot run both: a chrooted worker (reapitest.Options.Chroot,
// needing root) has no host clang to run, and one that is not chrooted
// would not show that a shipped compiler runs from its input root alone.
// So the part runs two: one whose workers run each command chrooted into
// its input root, started through /usr/bin/env there (as Buildbarn's
// chrooting runner), for inputs; one whose workers run on the host, for
// installed. Every link is lld's DTLTO link with thindist as the
// distributor, every backend remote (--remote-local-jobs=0).
//
// -runs times, a pair:
//
//   - the first link against an empty CAS (a new chrooted server) and an
//     empty local cache, shipping the compiler: the toolchain files' bytes
//     the server received, against what zstd at thindist's level
//     (SpeedFastest, internal/remote) makes of the tree's distinct files,
//     and how many files went up more than once; then a second link from
//     another empty local cache under an ActionCache instance of its own
//     (so that it executes, finding the tree in the CAS): the toolchain
//     bytes it uploaded;
//   - the warm link, installed and inputs in alternating order, each
//     against its server's warm CAS (the modules there, and for inputs the
//     tree), under a new ActionCache instance (every backend executes),
//     from a new local cache holding only the first link's digest table
//     (as any link after a developer's first finds it: the tree's 265 MB
//     stated, not hashed again): wall, the client's CPU (clang's driver,
//     lld, thindist: the link's rusage; the servers are not its
//     descendants) per action, and bytes uploaded.

// toolchainLink is one warm link's figures.
type toolchainLink struct {
	wall, cpu  time.Duration // cpu: the client's, user+system
	others     float64       // the share of the machine others used meanwhile, the servers' CPU not counted
	bytesUp    int64         // received by the server, as sent
	executions int64
	summary    string  // thindist's remote summary line
	selfMS     float64 // thindist's own CPU per action, from summary (0: not found)
}

// toolchainRun is one pair: the first link's transfers and the warm links.
type toolchainRun struct {
	first      shippedUploads // the first link, empty CAS
	second     shippedUploads // the second link, empty local cache
	firstWall  time.Duration
	installed  toolchainLink
	inputs     toolchainLink
	firstLink  string // thindist's remote summary line of the first link
	secondLink string
}

// shippedUploads is what a link uploaded of the toolchain's files.
type shippedUploads struct {
	files     int   // distinct files
	raw, wire int64 // their bytes, raw and as received
	twice     int   // files received more than once
}

type toolchainResult struct {
	actions    int
	remoteJobs int
	// The tree shipped: distinct files, their size, and zstd's size of
	// them at thindist's level.
	files     int
	raw, zstd int64
	runs      []toolchainRun
	// load is /proc/loadavg's first figure at the part's start and end.
	load [2]string
}

// countShipped sums the uploads of the files in shipped (by hash).
func countShipped(uploads []reapitest.UploadRecord, shipped map[string]bool) shippedUploads {
	var s shippedUploads
	seen := map[string]int{}
	for _, u := range uploads {
		if !shipped[u.Hash] {
			continue
		}
		seen[u.Hash]++
		s.raw += u.SizeBytes
		s.wire += u.WireBytes
		if seen[u.Hash] == 2 {
			s.twice++
		}
	}
	s.files = len(seen)
	return s
}

// zstdSize is the size of each file compressed on its own, as thindist
// sends a blob, at thindist's level, summed.
func zstdSize(files map[string]bool) (int64, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return 0, err
	}
	defer enc.Close()
	var n int64
	for f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		n += int64(len(enc.EncodeAll(data, nil)))
	}
	return n, nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func benchToolchain(ctx context.Context, t *tools, o *options, p *project) (*toolchainResult, error) {
	if why := reapitest.ChrootSupported(); why != "" {
		return nil, fmt.Errorf("%s", why)
	}
	tree, err := toolchain.NewDigests(nil).Tree(t.tc.Clang)
	if err != nil {
		return nil, fmt.Errorf("the toolchain of %s: %w", t.tc.Clang, err)
	}
	shipped, paths := map[string]bool{}, map[string]bool{}
	for d, f := range tree.Files {
		shipped[d.HexHash()] = true
		paths[f] = true
	}
	res := &toolchainResult{actions: p.build.Modules, remoteJobs: o.remoteJobs, files: tree.Count, raw: tree.Bytes}
	res.load[0] = loadAverage()
	if res.zstd, err = zstdSize(paths); err != nil {
		return nil, err
	}
	dir := filepath.Join(o.work, "toolchain")
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	mkdir := func(name string) (string, error) {
		d := filepath.Join(dir, name)
		os.RemoveAll(d)
		return d, os.MkdirAll(d, 0o755)
	}
	installedRoot, err := mkdir("exec-installed")
	if err != nil {
		return nil, err
	}
	installed, err := server.Start(ctx, installedRoot, "")
	if err != nil {
		return nil, err
	}
	defer installed.Stop()

	out := "bench-toolchain.out"
	link := func(srv *server.Proc, mode, instance, cache string) (toolchainLink, []reapitest.UploadRecord, error) {
		var l toolchainLink
		if _, err := srv.Call("reset"); err != nil {
			return l, nil, err
		}
		args := []string{"-fthinlto-distributor=" + t.thindist}
		for _, a := range []string{"--cache-dir=" + cache, "--remote=grpc://" + srv.Addr, "--remote-fallback=none",
			"--remote-local-jobs=0", fmt.Sprintf("--remote-jobs=%d", o.remoteJobs),
			"--remote-toolchain=" + mode, "--remote-instance=" + instance} {
			args = append(args, "-Xthinlto-distributor="+a)
		}
		os.Remove(filepath.Join(p.build.Dir, out))
		machine.WaitQuiet(ctx, o.maxBusy, o.settle)
		srv0 := srv.CPU()
		tm, err := timed(ctx, p.build.Dir, nil, t.tc.Clang, p.build.LinkArgs(out, args...)...)
		// The server and its workers are the benchmark's: their CPU is
		// not other processes'.
		if srvCPU := srv.CPU() - srv0; srvCPU > 0 && tm.wall > 0 {
			tm.others = max(0, tm.others-float64(srvCPU)/(float64(tm.wall)*float64(runtime.NumCPU())))
		}
		if err == nil {
			err = p.check(ctx, filepath.Join(p.build.Dir, out))
		}
		if err != nil {
			return l, nil, fmt.Errorf("%s link (instance %s): %w", mode, instance, err)
		}
		st, uploads, err := srv.Stats()
		if err != nil {
			return l, nil, err
		}
		l = toolchainLink{wall: tm.wall, cpu: tm.cpu, others: tm.others, bytesUp: st.BytesUploadedWire,
			executions: st.Executions, summary: remoteSummary.FindString(string(tm.output))}
		if m := clientCPU.FindStringSubmatch(l.summary); m != nil {
			l.selfMS, _ = strconv.ParseFloat(m[1], 64)
		}
		return l, uploads, nil
	}
	// The installed server's CAS is warmed once: the modules, the Actions
	// and their Commands.
	primeCache, err := mkdir("cache-prime")
	if err != nil {
		return nil, err
	}
	if _, _, err := link(installed, "installed", "prime", primeCache); err != nil {
		return nil, fmt.Errorf("warming the installed server: %w", err)
	}
	for run := 0; run < o.runs; run++ {
		var r toolchainRun
		// The first link, against a new server's empty CAS.
		chrootRoot, err := mkdir("exec-inputs")
		if err != nil {
			return nil, err
		}
		inputs, err := server.StartChrooted(ctx, chrootRoot)
		if err != nil {
			return nil, err
		}
		stop := func(err error) (*toolchainResult, error) { inputs.Stop(); return nil, err }
		firstCache, err := mkdir("cache-first")
		if err != nil {
			return stop(err)
		}
		first, uploads, err := link(inputs, "inputs", fmt.Sprintf("first-%d", run), firstCache)
		if err != nil {
			return stop(fmt.Errorf("first link, empty CAS: %w", err))
		}
		r.first, r.firstWall, r.firstLink = countShipped(uploads, shipped), first.wall, first.summary
		secondCache, err := mkdir("cache-second")
		if err != nil {
			return stop(err)
		}
		second, uploads, err := link(inputs, "inputs", fmt.Sprintf("second-%d", run), secondCache)
		if err != nil {
			return stop(fmt.Errorf("second link, empty local cache: %w", err))
		}
		r.second, r.secondLink = countShipped(uploads, shipped), second.summary
		// The warm pair, alternating which goes first.
		digests, err := os.ReadFile(filepath.Join(firstCache, "digests"))
		if err != nil {
			return stop(fmt.Errorf("the first link's digest table: %w", err))
		}
		for k := 0; k < 2; k++ {
			mode, srv, into := "installed", installed, &r.installed
			if (run+k)%2 == 1 {
				mode, srv, into = "inputs", inputs, &r.inputs
			}
			cache, err := mkdir("cache-warm")
			if err == nil {
				err = os.WriteFile(filepath.Join(cache, "digests"), digests, 0o644)
			}
			if err == nil {
				*into, _, err = link(srv, mode, fmt.Sprintf("warm-%d", run), cache)
			}
			if err != nil {
				return stop(fmt.Errorf("warm link: %w", err))
			}
		}
		inputs.Stop()
		res.runs = append(res.runs, r)
		fmt.Fprintf(os.Stderr, "bench: %s toolchain run %d: first link %s, toolchain %d files, %d B up (%d raw), %d twice; second link %d B of toolchain up; "+
			"warm installed %s, CPU %s, %d B up, %d executed; inputs %s, CPU %s, %d B up, %d executed\n",
			p.build.Name, run+1, sec(r.firstWall), r.first.files, r.first.wire, r.first.raw, r.first.twice, r.second.wire,
			sec(r.installed.wall), sec(r.installed.cpu), r.installed.bytesUp, r.installed.executions,
			sec(r.inputs.wall), sec(r.inputs.cpu), r.inputs.bytesUp, r.inputs.executions)
	}
	res.load[1] = loadAverage()
	return res, nil
}
