package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
)

// The scheduling-from-history measurement (issue 12, item 4). A link whose
// bitcode sizes misorder the work: six library modules of 60 small
// functions each, made the largest modules by a table of constant data
// (about 60 KiB of bitcode, cheap to compile), and a driver of 30 KiB that
// calls all 360 functions. The thin link imports every one of them into
// the driver, whose backend inlines and compiles them all again: the
// driver is the smallest module and by far the longest backend, as a small
// source heavy in inlined templates is. Ordered by size, it starts last
// and runs alone at the end; ordered by the time recorded for each module
// in the previous run, it starts first. Each link is timed end to end with
// every backend compiled (--no-cache); "by size" runs with --no-record (no
// history), "from history" with records after an untimed first link.

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
	fmt.Fprintf(&b, "scheduling from history (%d library modules + a smaller driver that inlines them all, --jobs=%d, --no-cache):\n", historyLight, historyJobs)
	fmt.Fprintf(&b, "  by bitcode size: median %s of %v\n", median(h.bySize).Round(time.Millisecond), rounded(h.bySize))
	fmt.Fprintf(&b, "  from history:    median %s of %v\n", median(h.byHistory).Round(time.Millisecond), rounded(h.byHistory))
	bySize := append([]string(nil), h.order...)
	sort.SliceStable(bySize, func(i, j int) bool { return h.sizes[bySize[i]] > h.sizes[bySize[j]] })
	fmt.Fprintf(&b, "  the same schedules computed from the modules' measured CPU times (no other load): by size %s, from history %s\n",
		makespan(bySize, h.cpu, historyJobs).Round(time.Millisecond), makespan(h.order, h.cpu, historyJobs).Round(time.Millisecond))
	fmt.Fprintf(&b, "  order from history: %s\n", strings.Join(h.order, ", "))
	for _, m := range h.order {
		fmt.Fprintf(&b, "    %-9s %6d B bitcode, %s CPU\n", m, h.sizes[m], h.cpu[m].Round(time.Millisecond))
	}
	return b.String()
}

// makespan is when the last of the modules ends if slots compile them in
// the given order, each taking its CPU time, each slot taking the next
// module as soon as it is free: the scheduler's rule on an idle machine.
func makespan(order []string, cpu map[string]time.Duration, slots int) time.Duration {
	free := make([]time.Duration, slots)
	var end time.Duration
	for _, m := range order {
		k := 0
		for i := range free {
			if free[i] < free[k] {
				k = i
			}
		}
		free[k] += cpu[m]
		end = max(end, free[k])
	}
	return end
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// writeHistorySources writes the library modules and the driver into dir
// and returns their objects' names.
func writeHistorySources(dir string) ([]string, error) {
	var objs []string
	var driver strings.Builder
	for m := 0; m < historyLight; m++ {
		var b strings.Builder
		for k := 0; k < 60; k++ {
			fmt.Fprintf(&b, "int l%d_%d(int *a, int n) { int s = %d; for (int i = 0; i < n; i++) s += a[i] * %d ^ (s >> %d); return s; }\n",
				m, k, k, k+3+m, k%7+1)
			fmt.Fprintf(&driver, "int l%d_%d(int *a, int n);\n", m, k)
		}
		fmt.Fprintf(&b, "const unsigned table%d[15000] = {", m)
		x := uint32(m + 1)
		for i := 0; i < 15000; i++ {
			x = x*1664525 + 1013904223
			fmt.Fprintf(&b, "%du,", x)
		}
		b.WriteString("};\n")
		name := fmt.Sprintf("lib%d", m)
		if err := os.WriteFile(filepath.Join(dir, name+".c"), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		objs = append(objs, name+".o")
	}
	driver.WriteString("int main(int argc, char **argv) {\n  int a[64] = {0}, s = 0;\n  (void)argv;\n")
	for m := 0; m < historyLight; m++ {
		for k := 0; k < 60; k++ {
			fmt.Fprintf(&driver, "  s += l%d_%d(a, argc * %d);\n", m, k, k+1)
		}
	}
	driver.WriteString("  return s == 42;\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "driver.c"), []byte(driver.String()), 0o644); err != nil {
		return nil, err
	}
	return append(objs, "driver.o"), nil
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
