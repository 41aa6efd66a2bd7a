package main

import (
	"fmt"
	"strings"
	"time"
)

// The text and markdown of the thindist link, cache and remote measurements.

func (r *projectResult) hasLinks() bool {
	return len(r.links) > thindistLink && len(r.links[thindistLink]) > 0
}

func (r *projectResult) linkRatios() (ln, dt, ip time.Duration) {
	return median(walls(r.links[thindistLink])), median(walls(r.links[thindist])), median(walls(r.links[inProcess]))
}

func (r *projectResult) cacheMedians() (m [3][3]time.Duration) {
	for i := range m {
		for s := range m[i] {
			m[i][s] = median(walls(r.cache.links[i][s]))
		}
	}
	return m
}

// splitParts are the medians of a DTLTO link's parts over the runs (each
// part's own median, so they need not add up exactly).
type splitParts struct {
	wall     time.Duration // the whole link
	lldSide  time.Duration // wall minus the distributor process
	dist     time.Duration // the distributor process
	critical time.Duration // the compiled backends' critical path on N slots
	own      time.Duration // the distributor's time beyond that path
	floor    time.Duration // lldSide + critical: any distributor's least
}

func (r *projectResult) splitParts(tool, state, n int) splitParts {
	var wall, lld, dist, crit, own, floor []time.Duration
	for j, sp := range r.cache.splits[tool][state] {
		w := r.cache.links[tool][state][j].wall
		c := sp.criticalPath(n)
		wall = append(wall, w)
		lld = append(lld, w-sp.dist)
		dist = append(dist, sp.dist)
		crit = append(crit, c)
		own = append(own, sp.dist-c)
		floor = append(floor, w-sp.dist+c)
	}
	return splitParts{median(wall), median(lld), median(dist), median(crit), median(own), median(floor)}
}

func (r *projectResult) cacheText(n int) string {
	var b strings.Builder
	m := r.cacheMedians()
	fmt.Fprintf(&b, "\n%s, cache: median wall of %d runs\n", r.p.name, len(r.cache.links[0][0]))
	for i, ct := range cacheTools {
		fmt.Fprintf(&b, "  %-24s cold %s  warm %s  one change %s\n", ct.name, sec(m[i][cold]), sec(m[i][warm]), sec(m[i][oneChange]))
	}
	for i, ct := range cacheTools {
		if !ct.thindist {
			continue
		}
		fmt.Fprintf(&b, "  %-24s warm / cold %.3f (target ≤ 0.10), one change / lld one change %.3f (target ≤ 1.3)\n",
			ct.name, ratio(m[i][warm], m[i][cold]), ratio(m[i][oneChange], m[cacheLLD][oneChange]))
		sp := r.splitParts(i, oneChange, n)
		fmt.Fprintf(&b, "  %-24s one change: lld's DTLTO side %s + distributor %s (backends' critical path %s, rest %s); floor %s = %.3f × lld one change, thindist / floor %.3f\n",
			"", sec(sp.lldSide), sec(sp.dist), sec(sp.critical), sec(sp.own), sec(sp.floor),
			ratio(sp.floor, m[cacheLLD][oneChange]), ratio(sp.wall, sp.floor))
	}
	for s, st := range cacheStates {
		fmt.Fprintf(&b, "  thindist %s: %s\n", st, r.cache.summary[s])
		fmt.Fprintf(&b, "  lld %s: %d new cache entries\n", st, r.cache.lldNew[s])
	}
	return b.String()
}

func (r *projectResult) remoteText() string {
	var b strings.Builder
	rr := r.remote
	c, w, wi := median(rr.colds()), median(rr.warms()), median(rr.warmsInline())
	fmt.Fprintf(&b, "\n%s, remote (test double on loopback, --remote-jobs=%d): cold %s, warm relink %s (%.3f × cold), with a server that inlines outputs %s (%.3f × cold)\n",
		r.p.name, rr.remoteJobs, sec(c), sec(w), ratio(w, c), sec(wi), ratio(wi, c))
	for _, x := range rr.runs {
		fmt.Fprintf(&b, "  uploaded %d B of %d distinct (%.3f); %.2f RPCs per action cold, %.2f warm, %.2f warm with inlining; thindist's CPU per action %s cold, %s warm\n",
			x.coldStats.BytesUploadedRaw, x.distinctBytes, float64(x.coldStats.BytesUploadedRaw)/float64(max(1, x.distinctBytes)),
			float64(rpcs(x.coldStats))/float64(max(1, x.coldStats.Executions)), float64(rpcs(x.warmStats))/float64(max(1, r.actions())),
			float64(rpcs(x.warmInlineStats))/float64(max(1, r.actions())), cpuPerAction(x.coldSummary), cpuPerAction(x.warmSummary))
	}
	return b.String()
}

// actions is the number of backend actions of a link.
func (r *projectResult) actions() int64 { return int64(r.p.build.Modules) }

// thinlinkMarkdown writes the part "thinlink": thindist link against
// DTLTO, measured in the rotation of the links.
func (rep *report) thinlinkMarkdown(b *strings.Builder, withLinks []*projectResult) {
	fmt.Fprintf(b, "### `thindist link` (issue 5), median of %d runs, N = %d, no cache\n\n", rep.runs, rep.jobs)
	b.WriteString("Measured in the same rotation as the table above: `thindist link --no-cache --jobs=N -- clang -flto=thin -fuse-ld=lld ...` " +
		"(the thin link with `--thinlto-index-only`, the backends, the final link) against DTLTO through thindist " +
		"(`--no-cache`) and in-process ThinLTO, on the same objects.\n\n")
	b.WriteString("| project | in-process | DTLTO through thindist | thindist link | link / DTLTO (≤ 1.05) | link / in-process | CPU DTLTO | CPU link |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range withLinks {
		ln, dt, ip := r.linkRatios()
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.3f | %.3f | %s | %s |\n", r.p.name, sec(ip), sec(dt), sec(ln), ratio(ln, dt), ratio(ln, ip),
			sec(median(cpus(r.links[thindist]))), sec(median(cpus(r.links[thindistLink]))))
	}
}

// cacheMarkdown writes the part "cache" (issue 3).
func (rep *report) cacheMarkdown(b *strings.Builder, withCache []*projectResult) {
	fmt.Fprintf(b, "### Cache (issue 3), median of %d runs, N = %d\n\n", rep.runs, rep.jobs)
	b.WriteString("Each run starts with empty caches (a fresh `--cache-dir` for thindist as lld's DTLTO distributor, " +
		"a fresh `-Wl,--thinlto-cache-dir` for lld, both for thindist with lld's cache in front of it): " +
		"**cold** link, **warm** relink with nothing changed, " +
		"then the one-source change is swapped in, **one change** relink, and the change swapped out again.\n\n")
	for _, r := range withCache {
		fmt.Fprintf(b, "- %s: %s\n", r.p.name, r.p.changeDesc)
	}
	b.WriteString("\n| project | method | cold | warm | one change | warm / cold (≤ 0.10) | one change / lld's one change (≤ 1.3) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range withCache {
		m := r.cacheMedians()
		for i, ct := range cacheTools {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.3f | %.3f |\n", r.p.name, ct.name,
				sec(m[i][cold]), sec(m[i][warm]), sec(m[i][oneChange]),
				ratio(m[i][warm], m[i][cold]), ratio(m[i][oneChange], m[cacheLLD][oneChange]))
		}
	}
	b.WriteString("\nWhere a DTLTO relink's time goes. **lld's DTLTO side** is the link's wall time minus the distributor " +
		"process's (lld's thin link, writing every index shard and the job file, reading the objects back, the final link); " +
		"**critical path** is max(largest, Σ / N) of the backends thindist compiled in that relink, from its trace; " +
		"**floor** = lld's DTLTO side + critical path, what any distributor needs for the same relink; " +
		"**thindist's rest** = distributor − critical path (start-up, cache lookups, writing outputs). Medians of each part:\n\n")
	b.WriteString("| project | method | relink | wall | lld's DTLTO side | distributor | critical path | thindist's rest | floor | floor / lld's one change | wall / floor |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range withCache {
		m := r.cacheMedians()
		for i, ct := range cacheTools {
			if !ct.thindist {
				continue
			}
			for _, s := range []int{warm, oneChange} {
				sp := r.splitParts(i, s, rep.jobs)
				fl := "–"
				if s == oneChange {
					fl = fmt.Sprintf("%.3f", ratio(sp.floor, m[cacheLLD][oneChange]))
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.3f |\n", r.p.name, ct.name, cacheStates[s],
					sec(sp.wall), sec(sp.lldSide), sec(sp.dist), sec(sp.critical), sec(sp.own), sec(sp.floor), fl, ratio(sp.wall, sp.floor))
			}
		}
	}
	b.WriteString("\nEvery run: wall seconds (share of the machine's CPU other processes used during it; cache runs are not repeated, a repeated cold link would be warm):\n\n```\n")
	for _, r := range withCache {
		for i, ct := range cacheTools {
			for s, st := range cacheStates {
				fmt.Fprintf(b, "%-24s %-24s %-11s", r.p.name, ct.name, st)
				for _, t := range r.cache.links[i][s] {
					fmt.Fprintf(b, " %7.3f (%2.0f%%)", t.wall.Seconds(), 100*t.interference)
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("```\n\nthindist's summary line of the last run of each state (thindist alone), and how many entries that run added to lld's cache directory (lld in-process: the backends lld ran):\n\n```\n")
	for _, r := range withCache {
		for s, st := range cacheStates {
			fmt.Fprintf(b, "%-24s %-11s %s\n", r.p.name, st, r.cache.summary[s])
			fmt.Fprintf(b, "%-24s %-11s lld: %d new cache entries\n", r.p.name, st, r.cache.lldNew[s])
		}
	}
	b.WriteString("```\n")
}

// remoteMarkdown writes the part "remote" (issue 4).
func (rep *report) remoteMarkdown(b *strings.Builder, withRemote []*projectResult) {
	rr0 := withRemote[0].remote
	fmt.Fprintf(b, "### Remote execution (issue 4), median of %d runs, N = %d\n\n", len(rr0.runs), rep.jobs)
	fmt.Fprintf(b, "thindist as lld's DTLTO distributor with `--no-cache --remote=grpc://127.0.0.1:PORT --remote-fallback=none`, "+
		"against the in-repo REAPI test double (`internal/reapitest`, zstd) on loopback, a fresh server for every run. "+
		"**Cold**: every backend executed remotely, `--remote-jobs=%d`; the server's workers run on this same %d-CPU machine, "+
		"so cold remote vs local measures protocol overhead on one box, not a cluster's speed-up. "+
		"**Local** is the DTLTO thindist median of the first table (`--no-cache`). "+
		"**Warm**: a relink from a copy of the build directory elsewhere (same relative paths) against the same server, "+
		"which does not inline outputs in GetActionResult (as servers that ignore `inline_output_files`); **warm, inlined**: "+
		"the same relink again once the server inlines them (as BuildBuddy does). "+
		"**Distinct bytes**: the sizes of the distinct blobs the cold link uploaded, each counted once "+
		"(the server's upload records); thindist's own count of the distinct bytes its actions needed is in its summary line below. "+
		"Round trips: the RPCs the server received, GetCapabilities excluded, per action.\n\n", rr0.remoteJobs, rep.jobs)
	b.WriteString("| project | actions | local | cold remote | warm relink | cold / local | warm / cold (≤ 0.1) | warm, inlined | warm, inlined / cold | bytes uploaded | distinct bytes | uploaded / distinct (≤ 1.05) | on the wire | RPCs per action cold | RPCs per action warm | RPCs per action warm, inlined | executions warm |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range withRemote {
		rr := r.remote
		c, w, wi := median(rr.colds()), median(rr.warms()), median(rr.warmsInline())
		local := "–"
		cl := "–"
		if r.hasLinks() {
			l := median(walls(r.links[thindist]))
			local, cl = sec(l), fmt.Sprintf("%.3f", ratio(c, l))
		}
		last := rr.runs[len(rr.runs)-1]
		var warmExec []string
		for _, x := range rr.runs {
			warmExec = append(warmExec, fmt.Sprint(x.warmStats.Executions+x.warmInlineStats.Executions))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %.3f | %s | %.3f | %d | %d | %.3f | %d | %.2f | %.2f | %.2f | %s |\n", r.p.name, r.actions(),
			local, sec(c), sec(w), cl, ratio(w, c), sec(wi), ratio(wi, c), last.coldStats.BytesUploadedRaw, last.distinctBytes,
			float64(last.coldStats.BytesUploadedRaw)/float64(max(1, last.distinctBytes)), last.coldStats.BytesUploadedWire,
			float64(rpcs(last.coldStats))/float64(r.actions()), float64(rpcs(last.warmStats))/float64(r.actions()),
			float64(rpcs(last.warmInlineStats))/float64(r.actions()), strings.Join(warmExec, ", "))
	}
	b.WriteString("\nEvery run, and the last run's calls and thindist's summary lines:\n\n```\n")
	for _, r := range withRemote {
		for i, x := range r.remote.runs {
			fmt.Fprintf(b, "%-24s run %d: cold %7.3f s (others %2.0f%%), %d executions, %d B uploaded (%d blobs, %d distinct), %d B on the wire; warm %6.3f s (others %2.0f%%), %d executions, %d blobs uploaded; warm, inlined %6.3f s (others %2.0f%%), %d executions\n",
				r.p.name, i+1, x.cold.wall.Seconds(), 100*x.cold.others, x.coldStats.Executions, x.coldStats.BytesUploadedRaw,
				x.coldStats.BlobsUploaded, x.distinctBlobs, x.coldStats.BytesUploadedWire,
				x.warm.wall.Seconds(), 100*x.warm.others, x.warmStats.Executions, x.warmStats.BlobsUploaded,
				x.warmInline.wall.Seconds(), 100*x.warmInline.others, x.warmInlineStats.Executions)
		}
		last := r.remote.runs[len(r.remote.runs)-1]
		fmt.Fprintf(b, "%-24s cold calls: %s\n", r.p.name, rpcBreakdown(last.coldStats))
		fmt.Fprintf(b, "%-24s warm calls: %s\n", r.p.name, rpcBreakdown(last.warmStats))
		fmt.Fprintf(b, "%-24s warm, inlined, calls: %s\n", r.p.name, rpcBreakdown(last.warmInlineStats))
		fmt.Fprintf(b, "%-24s cold: %s\n", r.p.name, last.coldSummary)
		fmt.Fprintf(b, "%-24s warm: %s\n", r.p.name, last.warmSummary)
	}
	b.WriteString("```\n")
}
