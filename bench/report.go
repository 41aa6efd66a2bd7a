package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/floor"
	"github.com/thindist/thindist/bench/internal/results"
)

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func walls(ts []timing) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.wall
	}
	return out
}

func cpus(ts []timing) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.cpu
	}
	return out
}

func sec(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

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

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type report struct {
	machine  []string
	when     time.Time
	runs     int
	jobs     int
	projects []*projectResult
	overhead *overheadResult
	history  *historyResult
	floor    *floor.Floor // the transport's floor, with the cluster simulation
}

// writeMarkdown puts the figures between the markers of path, keeping
// whatever else the file says (the findings written by hand), or creates it.
// The cluster simulation has markers of its own, so that measuring it alone
// (-parts cluster) keeps the other figures, and the other way round; within
// the other markers, each part measured (results.Order) has markers of its own
// too, so that measuring one part alone (-parts overhead) replaces that
// part and keeps the others, each saying when and on which commit it was
// measured.
func (rep *report) writeMarkdown(path string) error {
	var withCluster []*projectResult
	for _, r := range rep.projects {
		if r.cluster != nil {
			withCluster = append(withCluster, r)
		}
	}
	if len(withCluster) > 0 {
		var b strings.Builder
		rep.clusterMarkdown(&b, withCluster)
		if err := results.SpliceMarkdown(path, results.ClusterBegin, results.ClusterEnd, b.String()); err != nil {
			return err
		}
	}
	if !rep.measuredMoreThanCluster() {
		return nil
	}
	return results.SpliceParts(path, rep.parts())
}

// parts renders the parts this run measured, in results.Order.
func (rep *report) parts() []results.Part {
	var withLinks, withCache, withRemote []*projectResult
	for _, r := range rep.projects {
		if r.hasLinks() {
			withLinks = append(withLinks, r)
		}
		if r.cache != nil {
			withCache = append(withCache, r)
		}
		if r.remote != nil {
			withRemote = append(withRemote, r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The machine of the last run of any part (%s):\n\n", rep.when.Format("2006-01-02 15:04 MST"))
	for _, m := range rep.machine {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	parts := []results.Part{{Name: "machine", Text: b.String()}}
	// Each other part says when, and on which checkout, it was measured,
	// under its heading.
	stamp := fmt.Sprintf("Measured %s, thindist %s.\n\n", rep.when.Format("2006-01-02 15:04 MST"), rep.commit())
	stamped := func(name string, write func(b *strings.Builder)) {
		var b strings.Builder
		write(&b)
		heading, rest, _ := strings.Cut(b.String(), "\n\n")
		parts = append(parts, results.Part{Name: name, Text: heading + "\n\n" + stamp + rest})
	}
	if len(withLinks) > 0 {
		stamped("links", func(b *strings.Builder) { rep.linksMarkdown(b, withLinks) })
		stamped("thinlink", func(b *strings.Builder) { rep.thinlinkMarkdown(b, withLinks) })
	}
	if len(withCache) > 0 {
		stamped("cache", func(b *strings.Builder) { rep.cacheMarkdown(b, withCache) })
	}
	if len(withRemote) > 0 {
		stamped("remote", func(b *strings.Builder) { rep.remoteMarkdown(b, withRemote) })
	}
	if ov := rep.overhead; ov != nil {
		stamped("overhead", func(b *strings.Builder) { b.WriteString("### Distributor overhead\n\n" + ov.markdown()) })
	}
	if h := rep.history; h != nil {
		stamped("history", func(b *strings.Builder) {
			b.WriteString("### Scheduling from history\n\n```\n" + h.text() + "```\n")
		})
	}
	return parts
}

// commit is the checkout the figures come from (describeMachine).
func (rep *report) commit() string {
	for _, m := range rep.machine {
		if c, ok := strings.CutPrefix(m, "thindist: "); ok {
			return c
		}
	}
	return "?"
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
	b.WriteString("\nEvery run: wall seconds (share of the machine's CPU other processes used during the run beyond what the method leaves idle by design: N-1 of N cores for the serial distributor, none otherwise):\n\n```\n")
	for _, r := range withLinks {
		for i, m := range methods {
			fmt.Fprintf(b, "%-24s %-20s", r.p.name, m.name)
			for _, t := range r.links[i] {
				fmt.Fprintf(b, " %7.3f (%2.0f%%)", t.wall.Seconds(), 100*t.interference)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("```\n")
}

func (rep *report) measuredMoreThanCluster() bool {
	if rep.overhead != nil {
		return true
	}
	for _, r := range rep.projects {
		if r.hasLinks() || r.cache != nil || r.remote != nil {
			return true
		}
	}
	return false
}
