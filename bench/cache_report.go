package main

import (
	"fmt"
	"strings"
	"time"
)

// The cache part's figures (issue 3), as text and as the part "cache" of
// RESULTS.md.

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
}
