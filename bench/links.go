package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/internal/testsupport/realproj"
)

// The links part: the same objects linked by lld's in-process ThinLTO, the
// serial distributor and thindist (DTLTO, exec'd, `thindist link`), and the
// exec limit measured part by part.

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
			// clang link line, no cache, distributed however small.
			return t.thindist, []string{"link", "--no-cache", "--in-process-below=0", fmt.Sprintf("--jobs=%d", jobs), "--"}
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
			"-Xthinlto-distributor=--no-cache", "-Xthinlto-distributor=--worker=" + t.worker,
			// Workers of the link's own, not the per-user server's.
			"-Xthinlto-distributor=--worker-idle=0"}
	}},
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
