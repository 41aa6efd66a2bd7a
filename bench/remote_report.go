package main

import (
	"fmt"
	"strings"
)

// The remote part's figures (issue 4), as text and as the part "remote" of
// RESULTS.md.

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
	b.WriteString(r.remoteRunsText())
	return b.String()
}

// remoteRunsText is every run of the remote part, and the last run's calls
// and thindist's summary lines: printed with the part's figures, not
// written into RESULTS.md, whose part holds the table.
func (r *projectResult) remoteRunsText() string {
	var b strings.Builder
	for i, x := range r.remote.runs {
		fmt.Fprintf(&b, "%-24s run %d: cold %7.3f s (others %2.0f%%), %d executions, %d B uploaded (%d blobs, %d distinct), %d B on the wire; warm %6.3f s (others %2.0f%%), %d executions, %d blobs uploaded; warm, inlined %6.3f s (others %2.0f%%), %d executions\n",
			r.p.name, i+1, x.cold.wall.Seconds(), 100*x.cold.others, x.coldStats.Executions, x.coldStats.BytesUploadedRaw,
			x.coldStats.BlobsUploaded, x.distinctBlobs, x.coldStats.BytesUploadedWire,
			x.warm.wall.Seconds(), 100*x.warm.others, x.warmStats.Executions, x.warmStats.BlobsUploaded,
			x.warmInline.wall.Seconds(), 100*x.warmInline.others, x.warmInlineStats.Executions)
	}
	last := r.remote.runs[len(r.remote.runs)-1]
	fmt.Fprintf(&b, "%-24s cold calls: %s\n", r.p.name, rpcBreakdown(last.coldStats))
	fmt.Fprintf(&b, "%-24s warm calls: %s\n", r.p.name, rpcBreakdown(last.warmStats))
	fmt.Fprintf(&b, "%-24s warm, inlined, calls: %s\n", r.p.name, rpcBreakdown(last.warmInlineStats))
	fmt.Fprintf(&b, "%-24s cold: %s\n", r.p.name, last.coldSummary)
	fmt.Fprintf(&b, "%-24s warm: %s\n", r.p.name, last.warmSummary)
	return b.String()
}

// actions is the number of backend actions of a link.
func (r *projectResult) actions() int64 { return int64(r.p.build.Modules) }

// remoteMarkdown writes the part "remote" (issue 4).
func (rep *report) remoteMarkdown(b *strings.Builder, withRemote []*projectResult) {
	rr0 := withRemote[0].remote
	fmt.Fprintf(b, "### Remote execution (issue 4), median of %d runs, N = %d\n\n", len(rr0.runs), rep.jobs)
	fmt.Fprintf(b, "thindist as lld's DTLTO distributor with `--no-cache --remote=grpc://127.0.0.1:PORT --remote-fallback=none`, "+
		"against the in-repo REAPI test double (`internal/testsupport/reapitest`, zstd) on loopback, a fresh server for every run. "+
		"**Cold**: every backend executed remotely, `--remote-jobs=%d`; the server's workers run on this same %d-CPU machine, "+
		"so cold remote vs local measures protocol overhead on one box, not a cluster's speed-up. "+
		"**Local** is the DTLTO thindist median of the first table (`--no-cache`). "+
		"**Warm**: a relink from a copy of the build directory elsewhere (same relative paths) against the same server, "+
		"which does not inline outputs in GetActionResult (as servers that ignore `inline_output_files`); **warm, inlined**: "+
		"the same relink again once the server inlines them (as BuildBuddy does). "+
		"**Distinct bytes**: the sizes of the distinct blobs the cold link uploaded, each counted once "+
		"(the server's upload records); thindist's own count of the distinct bytes its actions needed is in its summary line, which the benchmark prints with every run's figures. "+
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
}
