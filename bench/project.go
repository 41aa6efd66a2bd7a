package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/internal/realproj"
	"github.com/thindist/thindist/internal/testprog"
)

// project is a set of bitcode objects ready for their final link, and a way
// to tell that a linked binary works.
type project struct {
	name  string
	build *realproj.Build
	check func(ctx context.Context, exe string) error
	// change and restore swap in and out the objects of a one-source
	// change (one module's source edited, that one object recompiled; see
	// change.go), prepared once by setupProject.
	change, restore func() error
	// changeDesc says what the change is.
	changeDesc string
	// checkChanged checks a binary linked with the change in place.
	checkChanged func(ctx context.Context, exe string) error
}

func setupProject(ctx context.Context, t *tools, dir, name string) (*project, error) {
	switch {
	case name == "lua":
		src, err := realproj.FindSource(realproj.LuaPackage)
		if err != nil {
			return nil, err
		}
		b, err := realproj.BuildLua(ctx, t.tc, src, dir)
		if err != nil {
			return nil, err
		}
		p := &project{name: "lua5.4", build: b, check: func(ctx context.Context, exe string) error {
			return expectOutput(ctx, dir, "Lua 5.4\t42\n", exe, "-e", `print(_VERSION, ("%d"):format(6*7))`)
		}}
		if err := prepareLuaChange(ctx, t, p, src); err != nil {
			return nil, fmt.Errorf("preparing the one-source change: %w", err)
		}
		return p, nil
	case name == "7zip":
		src, err := realproj.FindSource(realproj.SevenZipPackage)
		if err != nil {
			return nil, err
		}
		b, err := realproj.BuildSevenZip(ctx, t.tc, src, dir)
		if err != nil {
			return nil, err
		}
		return &project{name: "7-Zip (C++, -g)", build: b, check: func(ctx context.Context, exe string) error {
			return sevenZipRoundTrip(ctx, dir, exe)
		}}, nil
	case strings.HasPrefix(name, "gen"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "gen"))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("unknown project %q (want lua or genN, N ≥ 2)", name)
		}
		// testprog.Generate (as merged from e2e) does not create dir itself.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err := testprog.Generate(dir, testprog.Options{Modules: n, Seed: 1})
		if err != nil {
			return nil, err
		}
		// A kept work directory (-keep -work) holds the objects of an
		// earlier run: Generate wrote the same sources again.
		compiled := filepath.Join(dir, ".bench-compiled")
		if !objectsExist(p.Dir, p.Objects) || !fileExists(compiled) {
			if err := p.Compile(ctx, t.tc.Clang); err != nil {
				return nil, err
			}
			if err := os.WriteFile(compiled, nil, 0o644); err != nil {
				return nil, err
			}
		}
		b := &realproj.Build{Name: name, Dir: p.Dir, Objects: p.Objects, CFlags: []string{"-O2"}, Modules: len(p.Modules)}
		q := &project{name: fmt.Sprintf("generated, %d modules", n), build: b, check: func(ctx context.Context, exe string) error {
			return expectOutput(ctx, dir, p.Want, exe)
		}}
		if err := prepareGenChange(ctx, t, q, p); err != nil {
			return nil, fmt.Errorf("preparing the one-source change: %w", err)
		}
		return q, nil
	}
	return nil, fmt.Errorf("unknown project %q (want lua, 7zip or genN)", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func objectsExist(dir string, objs []string) bool {
	for _, o := range objs {
		if !fileExists(filepath.Join(dir, o)) {
			return false
		}
	}
	return true
}

// sevenZipRoundTrip checks a linked 7zz: it archives a file and extracts it
// to its standard output.
func sevenZipRoundTrip(ctx context.Context, dir, exe string) error {
	in := filepath.Join(dir, "roundtrip.txt")
	arc := filepath.Join(dir, "roundtrip.7z")
	want := strings.Repeat("thindist 7-Zip round trip\n", 1000)
	os.Remove(arc)
	if err := os.WriteFile(in, []byte(want), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, exe, "a", "-bd", "-y", arc, in).CombinedOutput(); err != nil {
		return fmt.Errorf("%s a: %v\n%s", exe, err, out)
	}
	return expectOutput(ctx, dir, want, exe, "e", "-so", arc)
}

func expectOutput(ctx context.Context, dir, want, exe string, args ...string) error {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running %s: %v", exe, err)
	}
	if string(out) != want {
		return fmt.Errorf("%s printed %q, want %q", exe, firstBytes(out), firstBytes([]byte(want)))
	}
	return nil
}

func firstBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// timing is one measured command.
type timing struct {
	wall time.Duration
	cpu  time.Duration // user+system of the command and every descendant it waited for
	// others is the share of the machine's CPU that other processes used
	// while it ran (0: the machine was ours).
	others float64
	// interference is the part of others beyond the capacity the command
	// leaves idle by design (a serial command leaves N-1 of N cores to
	// others without being slowed; a parallel one none). It is measured
	// against the method's width, not against the CPU the command did use:
	// a parallel link that others slow down uses less CPU, which must not
	// excuse them.
	interference float64
	// output is the command's standard output and error.
	output []byte
}

// timed runs name args in dir and measures it.
func timed(ctx context.Context, dir string, env []string, name string, args ...string) (timing, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	pr := machine.StartProbe()
	start := time.Now()
	err := cmd.Run()
	t := timing{wall: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			t.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	t.others = pr.Others(t.wall, t.cpu)
	t.output = stderr.Bytes()
	if err != nil {
		return t, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return t, nil
}

// quietTimed is timed on a quiet machine: it waits for quiet first, and
// repeats a run that other processes disturbed by more than
// o.maxInterference (at most o.retries times; the last one counts).
//
// width is how many cores the command is meant to keep busy.
func quietTimed(ctx context.Context, o *options, width int, dir string, env []string, name string, args ...string) (timing, error) {
	var t timing
	slack := max(0, 1-float64(width)/float64(runtime.NumCPU()))
	for attempt := 0; ; attempt++ {
		machine.WaitQuiet(ctx, o.maxBusy, o.settle)
		var err error
		t, err = timed(ctx, dir, env, name, args...)
		t.interference = max(0, t.others-slack)
		if err != nil || t.interference <= o.maxInterference || attempt >= o.retries || ctx.Err() != nil {
			return t, err
		}
		fmt.Fprintf(os.Stderr, "bench: other processes took %.0f%% of the machine from that run; repeating it\n", 100*t.interference)
	}
}

// method is one way of running the backends of a link.
type method struct {
	name  string
	extra func(t *tools, jobs int) []string
	// wrap, if set, runs the link through another command (thindist link):
	// it returns the program and the arguments before the clang driver.
	wrap func(t *tools, jobs int) (string, []string)
}

// command is the program and arguments that link b into out with m.
func (m method) command(t *tools, b *realproj.Build, jobs int, out string) (string, []string) {
	args := b.LinkArgs(out, m.extra(t, jobs)...)
	if m.wrap == nil {
		return t.tc.Clang, args
	}
	prog, pre := m.wrap(t, jobs)
	return prog, append(append(pre, t.tc.Clang), args...)
}

var methods = []method{
	{name: "in-process ThinLTO", extra: func(t *tools, jobs int) []string {
		return []string{fmt.Sprintf("-Wl,--thinlto-jobs=%d", jobs)}
	}},
	{name: "serial distributor", extra: func(t *tools, jobs int) []string {
		// As LLVM's own tests run local.py: python as the distributor,
		// the script as its first argument.
		return []string{"-fthinlto-distributor=" + t.python, "-Xthinlto-distributor=" + t.serial}
	}},
	{name: "thindist", extra: func(t *tools, jobs int) []string {
		// Cold: thindist's local cache (on by default since issue 3) is
		// left out here; the cache has its own measurements (cache.go).
		return []string{"-fthinlto-distributor=" + t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", jobs),
			"-Xthinlto-distributor=--no-cache"}
	}},
	{name: "thindist link", extra: func(t *tools, jobs int) []string { return nil },
		wrap: func(t *tools, jobs int) (string, []string) {
			// Issue 5: the separate thin-link flow, same objects, same
			// clang link line, no cache.
			return t.thindist, []string{"link", "--no-cache", fmt.Sprintf("--jobs=%d", jobs), "--"}
		}},
	{name: "thindist, exec", extra: func(t *tools, jobs int) []string {
		// The same as "thindist" with every compiler exec'd instead of
		// forked from a server: what the fork server saves.
		return []string{"-fthinlto-distributor=" + t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", jobs),
			"-Xthinlto-distributor=--no-cache", "-Xthinlto-distributor=--no-fork-server"}
	}},
	{name: "thindist, worker", extra: func(t *tools, jobs int) []string {
		// Backends on thindist-worker processes (docs/worker.md), started
		// for the link.
		return []string{"-fthinlto-distributor=" + t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", jobs),
			"-Xthinlto-distributor=--no-cache", "-Xthinlto-distributor=--worker=" + t.worker}
	}},
}

const (
	inProcess    = 0
	serial       = 1
	thindist     = 2
	thindistLink = 3
	thindistExec = 4
)

// projectResult is what benchProject measured.
type projectResult struct {
	p       *project
	jobs    int
	links   [][]timing // per method, per run
	thin    []time.Duration
	final   []time.Duration
	backend []time.Duration // each backend alone, in job order
	cache   *cacheResult
	remote  *remoteResult
	cluster *clusterResult
}

func benchProject(ctx context.Context, t *tools, o *options, p *project) (*projectResult, error) {
	b := p.build
	r := &projectResult{p: p, jobs: o.jobs, links: make([][]timing, len(methods))}
	out := "bench.out"
	for run := 0; run < o.runs; run++ {
		// Rotate the order so no method always runs first (cold page
		// cache) or right after another one.
		for k := range methods {
			i := (run + k) % len(methods)
			m := methods[i]
			os.Remove(filepath.Join(b.Dir, out))
			width := o.jobs
			if i == serial {
				width = 1
			}
			prog, args := m.command(t, b, o.jobs, out)
			tm, err := quietTimed(ctx, o, width, b.Dir, nil, prog, args...)
			if err != nil {
				return nil, fmt.Errorf("%s link: %w", m.name, err)
			}
			if err := p.check(ctx, filepath.Join(b.Dir, out)); err != nil {
				return nil, fmt.Errorf("%s link: %w", m.name, err)
			}
			tm.output = nil
			r.links[i] = append(r.links[i], tm)
			fmt.Fprintf(os.Stderr, "bench: %s run %d %-20s %7.3f s (others used %.0f%% of the machine, %.0f%% taken from this run)\n",
				b.Name, run+1, m.name, tm.wall.Seconds(), 100*tm.others, 100*tm.interference)
		}
	}
	if err := r.measureLimit(ctx, t, o); err != nil {
		return nil, err
	}
	return r, nil
}

// measureLimit measures the parts of the exec limit: every backend alone
// (from one extra serial link that logs each job's time and keeps each
// object), the thin link alone (--thinlto-index-only) and the final link of
// the kept native objects.
func (r *projectResult) measureLimit(ctx context.Context, t *tools, o *options) error {
	runs := o.runs
	b := r.p.build
	adir := filepath.Join(b.Dir, "..", filepath.Base(b.Dir)+"-limit")
	os.RemoveAll(adir)
	keep := filepath.Join(adir, "native")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return err
	}
	log := filepath.Join(adir, "backends.tsv")
	// The serial distributor appends to its log: one attempt, no retry
	// (the backends it times run one at a time, so they are the least
	// sensitive to other processes of all the measurements).
	machine.WaitQuiet(ctx, o.maxBusy, o.settle)
	_, err := timed(ctx, b.Dir, []string{"BENCH_SERIAL_LOG=" + log, "BENCH_SERIAL_KEEP=" + keep},
		t.tc.Clang, b.LinkArgs("bench.out", methods[serial].extra(t, r.jobs)...)...)
	if err != nil {
		return fmt.Errorf("analysis link: %w", err)
	}
	f, err := os.Open(log)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sec, _, _ := strings.Cut(sc.Text(), "\t")
		v, err := strconv.ParseFloat(sec, 64)
		if err != nil {
			f.Close()
			return fmt.Errorf("%s: %v", log, err)
		}
		r.backend = append(r.backend, time.Duration(v*float64(time.Second)))
	}
	f.Close()

	for i := 0; i < runs; i++ {
		tm, err := quietTimed(ctx, o, o.jobs, b.Dir, nil, t.tc.Clang,
			b.LinkArgs("bench-thin.out", "-Wl,--thinlto-index-only=bench-thin-index.txt")...)
		if err != nil {
			return fmt.Errorf("thin link: %w", err)
		}
		r.thin = append(r.thin, tm.wall)
	}
	removeShards(b.Dir)

	objs, err := filepath.Glob(filepath.Join(keep, "*.o"))
	if err != nil {
		return err
	}
	sort.Strings(objs)
	args := append([]string{"-fuse-ld=lld"}, b.CFlags...)
	args = append(args, objs...)
	args = append(args, b.Libs...)
	args = append(args, "-o", filepath.Join(adir, "final.out"))
	for i := 0; i < runs; i++ {
		tm, err := quietTimed(ctx, o, o.jobs, b.Dir, nil, t.tc.Clang, args...)
		if err != nil {
			return fmt.Errorf("final link: %w", err)
		}
		r.final = append(r.final, tm.wall)
	}
	if err := r.p.check(ctx, filepath.Join(adir, "final.out")); err != nil {
		return fmt.Errorf("final link of the native objects: %w", err)
	}
	return nil
}

// removeShards deletes what --thinlto-index-only left in the build
// directory.
func removeShards(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".thinlto.bc") || strings.HasSuffix(p, ".imports") ||
			filepath.Base(p) == "bench-thin-index.txt") {
			os.Remove(p)
		}
		return nil
	})
}
