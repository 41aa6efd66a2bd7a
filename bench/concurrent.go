package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The concurrent part (issue 48's item 7): several `thindist link`s of one
// program at once on a fresh cache, as Make or CMake link many executables
// of one library: sharing the cache directory, each backend is compiled
// once (cache.Claims) and the others wait for it; with caches of their
// own, every link compiles every backend, which is what links sharing a
// cache did before claims. A wrapper around clang counts the compiles
// (so the backends are exec'd through it: no worker takes a wrapper).

// concurrentLinks are the numbers of links run at once.
var concurrentLinks = []int{1, 2, 8}

// concurrentRun is one measurement: n links at once.
type concurrentRun struct {
	links    int
	shared   bool // one cache directory for all, else one each
	compiles int  // backend compiles, over all the links
	distinct int  // distinct backends among them
	wall     []time.Duration
}

type concurrentResult struct {
	modules int
	runs    []concurrentRun // per links, shared then own caches (the one link once)
}

func benchConcurrent(ctx context.Context, t *tools, o *options, p *project) (*concurrentResult, error) {
	dir := filepath.Join(o.work, p.build.Name+"-concurrent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "backends.log")
	cc := filepath.Join(dir, "clang")
	script := fmt.Sprintf(`#!/bin/sh
prev= mod= backend=
for a in "$@"; do
  case "$prev" in ir) mod=$a;; esac
  case "$a" in -fthinlto-index=*) backend=1;; esac
  prev=$a
done
[ -z "$backend" ] || printf '%%s\n' "${mod##*/}" >> '%s'
exec '%s' "$@"
`, log, t.tc.Clang)
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		return nil, err
	}
	r := &concurrentResult{modules: p.build.Modules}
	for _, n := range concurrentLinks {
		for _, shared := range []bool{true, false} {
			if n == 1 && !shared {
				continue
			}
			run := concurrentRun{links: n, shared: shared}
			for i := range o.runs {
				os.Remove(log)
				caches := filepath.Join(dir, fmt.Sprintf("cache-%d-%v-%d", n, shared, i))
				wall, err := concurrentLink(ctx, t, o, p, cc, caches, n, shared)
				os.RemoveAll(caches)
				if err != nil {
					return nil, err
				}
				run.wall = append(run.wall, wall)
				data, err := os.ReadFile(log)
				if err != nil {
					return nil, err
				}
				// One line a compile: a module's name may have spaces
				// (an archive member's, "liblua.a(lvm.o at 596962).o").
				compiles := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
				run.compiles, run.distinct = len(compiles), len(slices.Compact(slices.Sorted(slices.Values(compiles))))
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %d links at once, %s: %d compiles of %d distinct backends, %s\n",
				p.name, n, cacheKind(shared), run.compiles, run.distinct, sec(median(run.wall)))
			r.runs = append(r.runs, run)
		}
	}
	return r, nil
}

func cacheKind(shared bool) string {
	if shared {
		return "one cache"
	}
	return "a cache each"
}

// concurrentLink runs n links of p at once, each on a fresh cache under
// caches (one for all when shared), checks their programs and returns the
// wall time from the first's start to the last's end.
func concurrentLink(ctx context.Context, t *tools, o *options, p *project, cc, caches string, n int, shared bool) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		cache := caches
		if !shared {
			cache = filepath.Join(caches, fmt.Sprint(i))
		}
		out := fmt.Sprintf("concurrent-%d.out", i)
		args := append([]string{"link", fmt.Sprintf("--jobs=%d", o.jobs), "--cache-dir=" + cache, "--worker-idle=0", "--in-process-below=0", "--", cc}, p.build.LinkArgs(out)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := timed(ctx, p.build.Dir, nil, t.thindist, args...); err != nil {
				errs[i] = err
				return
			}
			errs[i] = p.check(ctx, filepath.Join(p.build.Dir, out))
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return wall, nil
}
