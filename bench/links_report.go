package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The links part's figures, as text and as the parts "links" and
// "thinlink" of RESULTS.md.

// limit is the exec limit of a distributed link on r.jobs cores (one exec'd
// compiler per backend), with
// its parts.
func (r *projectResult) limit() (total, thin, backends, final, largest, sum time.Duration) {
	for _, d := range r.backend {
		sum += d
		largest = max(largest, d)
	}
	thin, final = median(r.thin), median(r.final)
	backends = max(largest, sum/time.Duration(r.jobs))
	return thin + backends + final, thin, backends, final, largest, sum
}

func (r *projectResult) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: %d backend jobs, N = %d, %d runs each, median wall time (min–max; CPU of the whole link)\n",
		r.p.name, len(r.backend), r.jobs, len(r.links[0]))
	for i, m := range methods {
		w := walls(r.links[i])
		fmt.Fprintf(&b, "  %-22s %9s  (%.3f–%.3f; CPU %s)\n", m.name, sec(median(w)),
			slices.Min(w).Seconds(), slices.Max(w).Seconds(), sec(median(cpus(r.links[i]))))
	}
	total, thin, backends, final, largest, sum := r.limit()
	fmt.Fprintf(&b, "  %-22s %9s  = thin link %s + max(largest backend %s, Σ backends %s / %d) + final link %s\n",
		"exec limit", sec(total), sec(thin), sec(largest), sec(sum), r.jobs, sec(final))
	_ = backends
	td, ip, se := median(walls(r.links[thindist])), median(walls(r.links[inProcess])), median(walls(r.links[serial]))
	fmt.Fprintf(&b, "  thindist / in-process  %.3f   (target ≤ 1.05)\n", ratio(td, ip))
	fmt.Fprintf(&b, "  thindist / serial      %.3f   (target ≤ 0.55)\n", ratio(td, se))
	fmt.Fprintf(&b, "  thindist / limit       %.3f\n", ratio(td, total))
	te := median(walls(r.links[thindistExec]))
	fmt.Fprintf(&b, "  thindist exec / in-process %.3f, / limit %.3f; thindist / thindist exec %.3f\n",
		ratio(te, ip), ratio(te, total), ratio(td, te))
	fmt.Fprintf(&b, "  in-process / limit     %.3f\n", ratio(ip, total))
	ln := median(walls(r.links[thindistLink]))
	fmt.Fprintf(&b, "  thindist link / DTLTO  %.3f   (target ≤ 1.05)\n", ratio(ln, td))
	return b.String()
}

// linksMarkdown writes the part "links": the methods compared, and the
// exec limit.
func (rep *report) linksMarkdown(b *strings.Builder, withLinks []*projectResult) {
	fmt.Fprintf(b, "### Link wall time, median of %d runs, N = %d\n\n", rep.runs, rep.jobs)
	b.WriteString("| project | jobs | in-process | serial | thindist | thindist, exec | exec limit | thindist / in-process (≤ 1.05) | thindist / serial (≤ 0.55) | thindist / exec limit | thindist / thindist, exec |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range withLinks {
		total, _, _, _, _, _ := r.limit()
		td, ip, se := median(walls(r.links[thindist])), median(walls(r.links[inProcess])), median(walls(r.links[serial]))
		te := median(walls(r.links[thindistExec]))
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %.3f | %.3f | %.3f | %.3f |\n", r.p.name, len(r.backend),
			sec(ip), sec(se), sec(td), sec(te), sec(total), ratio(td, ip), ratio(td, se), ratio(td, total), ratio(td, te))
	}
	b.WriteString("\n\"thindist\" forks each compiler from a server started once per compiler (the default); \"thindist, exec\" runs it with --no-fork-server; \"thindist, worker\" compiles the backends on thindist-worker processes started for the link. ")
	b.WriteString("The exec limit is the least any distributor that execs one compiler per backend needs:\n")
	b.WriteString("thin link + max(largest backend, Σ backends / N) + final link, each part measured alone (backends exec'd one at a time by the serial distributor):\n\n")
	b.WriteString("| project | thin link | largest backend | Σ backends | final link | CPU in-process | CPU serial | CPU thindist |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range withLinks {
		_, thin, _, final, largest, sum := r.limit()
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.p.name, sec(thin), sec(largest), sec(sum), sec(final),
			sec(median(cpus(r.links[inProcess]))), sec(median(cpus(r.links[serial]))), sec(median(cpus(r.links[thindist]))))
	}
}

func (r *projectResult) hasLinks() bool {
	return len(r.links) > thindistLink && len(r.links[thindistLink]) > 0
}

func (r *projectResult) linkRatios() (ln, dt, ip time.Duration) {
	return median(walls(r.links[thindistLink])), median(walls(r.links[thindist])), median(walls(r.links[inProcess]))
}

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
