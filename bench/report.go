package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/floor"
	"github.com/thindist/thindist/bench/internal/results"
)

// median is the middle of xs (the mean of the two middle ones), 0 for
// none: of times, and of ratios.
func median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
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
	vmlinux  *vmlinuxResult
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
	var withLinks, withCache, withRemote, withWorker, withSmall, withConcurrent, withToolchain []*projectResult
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
		if r.worker != nil {
			withWorker = append(withWorker, r)
		}
		if r.small != nil {
			withSmall = append(withSmall, r)
		}
		if r.concurrent != nil {
			withConcurrent = append(withConcurrent, r)
		}
		if r.toolchain != nil {
			withToolchain = append(withToolchain, r)
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
	if len(withToolchain) > 0 {
		stamped("toolchain", func(b *strings.Builder) { rep.toolchainMarkdown(b, withToolchain) })
	}
	if ov := rep.overhead; ov != nil {
		stamped("overhead", func(b *strings.Builder) { b.WriteString("### Distributor overhead\n\n" + ov.markdown()) })
	}
	if h := rep.history; h != nil {
		stamped("history", func(b *strings.Builder) {
			b.WriteString("### Scheduling from history\n\n```\n" + h.text() + "```\n")
		})
	}
	if len(withWorker) > 0 {
		stamped("worker", func(b *strings.Builder) { rep.workerMarkdown(b, withWorker) })
	}
	if len(withSmall) > 0 {
		stamped("small", func(b *strings.Builder) { rep.smallMarkdown(b, withSmall) })
	}
	if len(withConcurrent) > 0 {
		stamped("concurrent", func(b *strings.Builder) { rep.concurrentMarkdown(b, withConcurrent) })
	}
	if v := rep.vmlinux; v != nil {
		stamped("vmlinux", func(b *strings.Builder) { v.markdown(b, rep.jobs) })
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

func (rep *report) measuredMoreThanCluster() bool {
	if rep.overhead != nil || rep.vmlinux != nil {
		return true
	}
	for _, r := range rep.projects {
		if r.hasLinks() || r.cache != nil || r.remote != nil || r.worker != nil || r.small != nil || r.concurrent != nil || r.toolchain != nil {
			return true
		}
	}
	return false
}
