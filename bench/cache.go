package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
)

// Issue 3's figures: a cold link, a warm relink with nothing changed and a
// relink after one source change, with thindist's local cache (DTLTO, a
// fresh --cache-dir), with thindist and lld's own cache together, and with
// lld's in-process ThinLTO and its own cache (-Wl,--thinlto-cache-dir).
// Each repetition starts from empty caches: the cold link populates them,
// the warm relink follows with nothing changed, then the change is swapped
// in (change.go) for the one-change relink, and swapped out again.
//
// Every DTLTO link also splits its wall time into lld's part and the
// distributor's (timewrap sits between them and records the distributor
// process's wall time), and reads thindist's trace for the backends it did
// compile: lld's part plus those backends' critical path is what any
// distributor would need for the same relink, the DTLTO floor.

const (
	cold = iota
	warm
	oneChange
)

var cacheStates = []string{"cold", "warm", "one change"}

type cacheTool struct {
	name     string
	thindist bool // thindist is lld's DTLTO distributor
	lldCache bool // lld's own cache (-Wl,--thinlto-cache-dir)
}

var cacheTools = []cacheTool{
	{name: "thindist", thindist: true},
	{name: "thindist + lld cache", thindist: true, lldCache: true},
	{name: "lld --thinlto-cache-dir", lldCache: true},
}

const (
	cacheThindist = 0
	cacheLLD      = 2
)

// args are the driver flags of a link with ct; dir holds its caches, rec
// receives the distributor's wall time, trace thindist's trace.
func (ct cacheTool) args(t *tools, jobs int, dir, rec, trace string) []string {
	var a []string
	if ct.thindist {
		a = append(a, "-fthinlto-distributor="+t.timewrap, "-Xthinlto-distributor="+rec,
			"-Xthinlto-distributor="+t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", jobs),
			"-Xthinlto-distributor=--cache-dir="+filepath.Join(dir, "thindist"), "-Xthinlto-distributor=--trace="+trace)
	} else {
		a = append(a, fmt.Sprintf("-Wl,--thinlto-jobs=%d", jobs))
	}
	if ct.lldCache {
		a = append(a, "-Wl,--thinlto-cache-dir="+filepath.Join(dir, "lld"))
	}
	return a
}

// split is where a DTLTO link's wall time went.
type split struct {
	ran  bool          // lld ran the distributor (not when its own cache had every job)
	dist time.Duration // the distributor process, start to exit
	// largest and sum are the wall times of the backends thindist compiled
	// (not served from its cache), from its trace.
	largest, sum time.Duration
	compiled     int
}

// criticalPath is the least wall time n slots need for the compiled
// backends: the largest one, or their total spread over n.
func (s split) criticalPath(n int) time.Duration {
	return max(s.largest, s.sum/time.Duration(n))
}

type cacheResult struct {
	// links[tool][state] per run
	links [3][3][]timing
	// splits[tool][state] per run, for the thindist tools
	splits [3][3][]split
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

// readSplit reads what timewrap recorded in rec and thindist traced in
// trace, then removes both.
func readSplit(rec, trace string) (split, error) {
	defer os.Remove(rec)
	defer os.Remove(trace)
	var s split
	w, err := readWrapRecord(rec)
	if err != nil || !w.ran {
		return s, err
	}
	s.ran, s.dist = true, w.wall
	backends, err := tracedBackends(trace)
	if err != nil {
		return s, err
	}
	for _, e := range backends {
		if e.where != "local" && e.where != "remote" {
			continue
		}
		s.compiled++
		s.sum += e.wall
		s.largest = max(s.largest, e.wall)
	}
	return s, nil
}

// tracedBackend is one backend of thindist's trace: where it ran
// ("local", "remote", or how it was served) and its wall time.
type tracedBackend struct {
	where string
	wall  time.Duration
}

// tracedBackends reads the backends of thindist's trace.
func tracedBackends(trace string) ([]tracedBackend, error) {
	tb, err := os.ReadFile(trace)
	if err != nil {
		return nil, err
	}
	var tr struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Dur  float64 `json:"dur"` // µs
			Args struct {
				Where string `json:"where"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(tb, &tr); err != nil {
		return nil, fmt.Errorf("%s: %v", trace, err)
	}
	var out []tracedBackend
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" && e.Args.Where != "" {
			out = append(out, tracedBackend{where: e.Args.Where, wall: time.Duration(e.Dur * float64(time.Microsecond))})
		}
	}
	return out, nil
}

func benchCache(ctx context.Context, t *tools, o *options, p *project) (*cacheResult, error) {
	if p.change == nil {
		return nil, fmt.Errorf("%s has no one-source change to measure", p.name)
	}
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
			rec, trace := filepath.Join(dir, "distributor-wall"), filepath.Join(dir, "trace.json")
			lldDir := filepath.Join(dir, "lld")
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
				before := countFiles(lldDir)
				machine.WaitQuiet(ctx, o.maxBusy, o.settle)
				tm, err := timed(ctx, b.Dir, nil, t.tc.Clang, b.LinkArgs(out, ct.args(t, o.jobs, dir, rec, trace)...)...)
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
				}
				if i == cacheLLD {
					r.lldNew[s] = countFiles(lldDir) - before
				}
				note := ""
				if ct.thindist {
					sp, err := readSplit(rec, trace)
					if err != nil {
						return nil, fmt.Errorf("%s %s link: %w", ct.name, cacheStates[s], err)
					}
					r.splits[i][s] = append(r.splits[i][s], sp)
					if sp.ran {
						note = fmt.Sprintf("; distributor %.3f s, %d compiled", sp.dist.Seconds(), sp.compiled)
					} else {
						note = "; distributor not run"
					}
				}
				tm.output = nil
				r.links[i][s] = append(r.links[i][s], tm)
				fmt.Fprintf(os.Stderr, "bench: %s run %d %-24s %-10s %7.3f s (others used %.0f%% of the machine%s)\n",
					b.Name, run+1, ct.name, cacheStates[s], tm.wall.Seconds(), 100*tm.others, note)
			}
			os.RemoveAll(dir)
		}
	}
	return r, nil
}
