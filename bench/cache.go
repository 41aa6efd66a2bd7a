package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Issue 3's figures: a cold link, a warm relink with nothing changed and a
// relink after one source change, with thindist's local cache (DTLTO, a
// fresh --cache-dir) and with lld's in-process ThinLTO and its own cache
// (-Wl,--thinlto-cache-dir). Each repetition starts from empty caches: the
// cold link populates them, the warm relink follows with nothing changed,
// then the change is swapped in (change.go) for the one-change relink, and
// swapped out again.

const (
	cold = iota
	warm
	oneChange
)

var cacheStates = []string{"cold", "warm", "one change"}

type cacheTool struct {
	name  string
	extra func(t *tools, jobs int, dir string) []string
}

var cacheTools = []cacheTool{
	{"thindist", func(t *tools, jobs int, dir string) []string {
		return []string{"-fthinlto-distributor=" + t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", jobs),
			"-Xthinlto-distributor=--cache-dir=" + dir}
	}},
	{"lld --thinlto-cache-dir", func(t *tools, jobs int, dir string) []string {
		return []string{fmt.Sprintf("-Wl,--thinlto-jobs=%d", jobs), "-Wl,--thinlto-cache-dir=" + dir}
	}},
}

const (
	cacheThindist = 0
	cacheLLD      = 1
)

type cacheResult struct {
	// links[tool][state] per run
	links [2][3][]timing
	// summary is thindist's summary line of each state's last run.
	summary [3]string
	// lldNew is how many entries each state's last run added to lld's
	// cache directory (the backends it ran rather than reused).
	lldNew [3]int
}

// countFiles counts lld's cache entries in dir (llvmcache-KEY; not its
// llvmcache.timestamp).
func countFiles(dir string) int {
	es, _ := os.ReadDir(dir)
	n := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "llvmcache-") {
			n++
		}
	}
	return n
}

var summaryLine = regexp.MustCompile(`(?m)^thindist: .*$`)

func benchCache(ctx context.Context, t *tools, o *options, p *project) (*cacheResult, error) {
	b := p.build
	r := &cacheResult{}
	out := "bench-cache.out"
	for run := 0; run < o.runs; run++ {
		for k := range cacheTools {
			i := (run + k) % len(cacheTools)
			ct := cacheTools[i]
			dir := filepath.Join(b.Dir, "..", filepath.Base(b.Dir)+"-cache", fmt.Sprintf("%d-%d", i, run))
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			for s := range cacheStates {
				check := p.check
				if s == oneChange {
					if err := p.change(); err != nil {
						return nil, err
					}
					check = p.checkChanged
				}
				os.Remove(filepath.Join(b.Dir, out))
				// No retry on a disturbed run: a repeated cold link would
				// be warm. The interference is recorded instead.
				before := countFiles(dir)
				waitQuiet(ctx, o.maxBusy, o.settle)
				tm, err := timed(ctx, b.Dir, nil, t.tc.Clang, b.LinkArgs(out, ct.extra(t, o.jobs, dir)...)...)
				tm.interference = tm.others
				if err == nil {
					err = check(ctx, filepath.Join(b.Dir, out))
				}
				if s == oneChange {
					if rerr := p.restore(); err == nil {
						err = rerr
					}
				}
				if err != nil {
					return nil, fmt.Errorf("%s %s link: %w", ct.name, cacheStates[s], err)
				}
				if i == cacheThindist {
					r.summary[s] = summaryLine.FindString(string(tm.output))
				} else {
					r.lldNew[s] = countFiles(dir) - before
				}
				tm.output = nil
				r.links[i][s] = append(r.links[i][s], tm)
				fmt.Fprintf(os.Stderr, "bench: %s run %d %-24s %-10s %7.3f s (others used %.0f%% of the machine)\n",
					b.Name, run+1, ct.name, cacheStates[s], tm.wall.Seconds(), 100*tm.others)
			}
			os.RemoveAll(dir)
		}
	}
	return r, nil
}
