package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/record"
)

// The scheduling-from-history measurement (issue 12, item 4). A link whose
// bitcode sizes misorder the work: six "light" modules of many small
// functions (about 12 KiB of bitcode each) and one "heavy" module of 3 KiB
// whose single loop is unrolled 1024 times by the backend (the ThinLTO
// pre-link pipeline leaves unrolling to the backend), so it is the smallest
// module and the longest backend. Ordered by size, the heavy module starts
// last and runs alone at the end; ordered by the time recorded for each
// module in the previous run, it starts first. Each link is timed end to
// end with every backend compiled (--no-cache); "by size" runs with
// --no-record (no history), "from history" with records after an untimed
// first link.

const (
	historyLight = 6
	historyJobs  = 2
)

type historyResult struct {
	bySize, byHistory []time.Duration
	// cpu is each module's backend CPU time in the last history run, and
	// order the order the last history run started them in.
	cpu   map[string]time.Duration
	order []string
	sizes map[string]int64
}

func (h *historyResult) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scheduling from history (%d light modules + 1 small heavy one, --jobs=%d, --no-cache):\n", historyLight, historyJobs)
	fmt.Fprintf(&b, "  by bitcode size: median %s of %v\n", median(h.bySize).Round(time.Millisecond), rounded(h.bySize))
	fmt.Fprintf(&b, "  from history:    median %s of %v\n", median(h.byHistory).Round(time.Millisecond), rounded(h.byHistory))
	fmt.Fprintf(&b, "  order from history: %s\n", strings.Join(h.order, ", "))
	for _, m := range h.order {
		fmt.Fprintf(&b, "    %-9s %6d B bitcode, %s CPU\n", m, h.sizes[m], h.cpu[m].Round(time.Millisecond))
	}
	return b.String()
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// writeHistorySources writes the light and heavy modules into dir.
func writeHistorySources(dir string) ([]string, error) {
	var objs []string
	for m := 0; m < historyLight; m++ {
		var b strings.Builder
		for k := 0; k < 60; k++ {
			fmt.Fprintf(&b, "int l%d_%d(int *a, int n) { int s = %d; for (int i = 0; i < n; i++) s += a[i] * %d ^ (s >> %d); return s; }\n",
				m, k, k, k+3+m, k%7+1)
		}
		name := fmt.Sprintf("light%d", m)
		if err := os.WriteFile(filepath.Join(dir, name+".c"), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		objs = append(objs, name+".o")
	}
	heavy := `void heavy(float *restrict a, const float *restrict b, const float *restrict c, int n) {
#pragma clang loop unroll_count(1024)
  for (int i = 0; i < n; i++)
    a[i] = a[i] * b[i] + c[i] / (b[i] + 1.0f) - a[i] * c[i];
}
int main(void) { return 0; }
`
	if err := os.WriteFile(filepath.Join(dir, "heavy.c"), []byte(heavy), 0o644); err != nil {
		return nil, err
	}
	return append(objs, "heavy.o"), nil
}

func benchHistory(ctx context.Context, t *tools, o *options) (*historyResult, error) {
	dir := filepath.Join(o.work, "history")
	cache := filepath.Join(dir, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	objs, err := writeHistorySources(dir)
	if err != nil {
		return nil, err
	}
	srcs := make([]string, len(objs))
	for i, obj := range objs {
		srcs[i] = strings.TrimSuffix(obj, ".o") + ".c"
	}
	if err := runIn(ctx, dir, t.tc.Clang, append([]string{"-O2", "-flto=thin", "-c"}, srcs...)...); err != nil {
		return nil, err
	}
	env := []string{"THINDIST_CACHE_DIR=" + cache}
	link := func(history bool) (time.Duration, error) {
		args := []string{"-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + t.thindist,
			fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", historyJobs), "-Xthinlto-distributor=--no-cache"}
		if !history {
			args = append(args, "-Xthinlto-distributor=--no-record")
		}
		args = append(append(args, objs...), "-o", "app")
		tm, err := quietTimed(ctx, o, historyJobs, dir, env, t.tc.Clang, args...)
		return tm.wall, err
	}
	// The first recorded link gives the history; it is not timed.
	if _, err := link(true); err != nil {
		return nil, err
	}
	res := &historyResult{cpu: map[string]time.Duration{}, sizes: map[string]int64{}}
	for i := 0; i < o.runs; i++ {
		// Alternate, so that a drift in the machine's load affects both.
		for _, history := range []bool{i%2 == 0, i%2 != 0} {
			d, err := link(history)
			if err != nil {
				return nil, err
			}
			if history {
				res.byHistory = append(res.byHistory, d)
			} else {
				res.bySize = append(res.bySize, d)
			}
		}
	}
	run, err := record.Open(cache).Load("last")
	if err != nil {
		return nil, err
	}
	for _, a := range run.Actions { // in the order they started
		res.order = append(res.order, a.Module)
		res.cpu[a.Module] = time.Duration(a.CPU) * time.Microsecond
		res.sizes[a.Module] = a.Size
	}
	return res, nil
}
