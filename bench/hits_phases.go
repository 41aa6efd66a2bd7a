package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// lld's own account of a fully cached relink: one more relink of each
// kind with lld's --time-trace, its phases' totals side by side. It shows
// where lld's DTLTO side spends what in-process does not (writing an index
// shard per backend before it runs the distributor, removing them after).

// lldPhases are the "Total …" events of one link's time trace, in time.
type lldPhases map[string]time.Duration

// umbrellaPhases hold the others; they are left out of the table.
var umbrellaPhases = map[string]bool{"ExecuteLinker": true, "Link": true, "LTO": true, "Run ThinLTO": true}

// tracePhases relinks once of each kind with --time-trace and reads the
// phases (each "Total" event is summed over the threads that ran it).
func (r *hitsResult) tracePhases(ctx context.Context, t *tools, o *options, p *project, dir, out string) error {
	for i, thindist := range []bool{true, false} {
		file := filepath.Join(dir, fmt.Sprintf("time-trace-%d.json", i))
		os.Remove(filepath.Join(p.build.Dir, out))
		args := append(hitsArgs(t, o, dir, thindist), "-Wl,--time-trace="+file)
		if _, err := timed(ctx, p.build.Dir, nil, t.tc.Clang, p.build.LinkArgs(out, args...)...); err != nil {
			return err
		}
		ph, err := readPhases(file)
		if err != nil {
			return err
		}
		r.phases[i] = ph
	}
	return nil
}

func readPhases(file string) (lldPhases, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Dur  float64 `json:"dur"` // µs
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	ph := lldPhases{}
	for _, e := range tr.TraceEvents {
		if name, ok := strings.CutPrefix(e.Name, "Total "); ok && e.Ph == "X" {
			ph[name] += time.Duration(e.Dur * float64(time.Microsecond))
		}
	}
	return ph, nil
}

// phasesText lists the phases that took 1 % or more of either link, the
// longest first.
func (r *hitsResult) phasesText(b *strings.Builder) {
	dt, ip := r.phases[0], r.phases[1]
	if dt == nil || ip == nil {
		return
	}
	whole := max(dt["ExecuteLinker"], ip["ExecuteLinker"])
	var names []string
	for _, ph := range []lldPhases{dt, ip} {
		for n, d := range ph {
			if !umbrellaPhases[n] && d*100 >= whole && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	sort.Slice(names, func(i, j int) bool { return max(dt[names[i]], ip[names[i]]) > max(dt[names[j]], ip[names[j]]) })
	fmt.Fprintf(b, "  lld's --time-trace, one more relink of each (DTLTO / in-process; each phase summed over lld's threads): whole link %s / %s\n",
		msText(dt["ExecuteLinker"]), msText(ip["ExecuteLinker"]))
	for _, n := range names {
		fmt.Fprintf(b, "    %-40s %9s %9s\n", n, msText(dt[n]), msText(ip[n]))
	}
}

func msText(d time.Duration) string { return fmt.Sprintf("%.1f ms", ms(d)) }
