package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/usage"
)

// The worker part's figures, as text and as the part "worker" of
// RESULTS.md.

// median is runner method i's median figures (the lower middle one of an
// even count), and the peak PSS and peak memory of its memory run.
func (w *workerResult) median(i int) workerRun {
	runs := w.runs[i]
	var walls, users, syss, faults, peaks []time.Duration
	for _, r := range runs {
		walls = append(walls, r.wall)
		users = append(users, r.use.User)
		syss = append(syss, r.use.Sys)
		faults = append(faults, time.Duration(r.use.Faults))
		peaks = append(peaks, time.Duration(r.use.PeakRSS))
	}
	return workerRun{wall: median(walls), use: usage.Usage{User: median(users), Sys: median(syss),
		Faults: int64(median(faults)), PeakRSS: int64(median(peaks)), PeakPSS: w.memory[i].PeakPSS,
		PeakMemory: w.memory[i].PeakMemory}}
}

func (w *workerResult) text(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: runners side by side, %d runs each, medians\n", name, len(w.runs[0]))
	ip := w.median(0)
	for i, m := range runnerMethods {
		r := w.median(i)
		fmt.Fprintf(&b, "  %-20s wall %s (%.3f×)  CPU %s (%.3f×)  sys %s  faults %d  peak RSS %s  PSS %s  memory %s\n",
			m.name, sec(r.wall), ratio(r.wall, ip.wall), sec(r.use.User+r.use.Sys), ratio(r.use.User+r.use.Sys, ip.use.User+ip.use.Sys),
			sec(r.use.Sys), r.use.Faults, mibRatio(r.use.PeakRSS, ip.use.PeakRSS), mibRatio(r.use.PeakPSS, ip.use.PeakPSS),
			mibRatio(r.use.PeakMemory, ip.use.PeakMemory))
	}
	return b.String()
}

// workerMarkdown writes the part "worker".
func (rep *report) workerMarkdown(b *strings.Builder, with []*projectResult) {
	fmt.Fprintf(b, "### Runners side by side (issue 32), median of %d runs, N = %d\n\n", rep.runs, rep.jobs)
	b.WriteString("| project | runner | wall | × in-process | CPU | × in-process | system | page faults | peak RSS | peak PSS | peak memory |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range with {
		ip := r.worker.median(0)
		for i, m := range runnerMethods {
			x := r.worker.median(i)
			cpu, ipcpu := x.use.User+x.use.Sys, ip.use.User+ip.use.Sys
			fmt.Fprintf(b, "| %s | %s | %s | %.3f | %s | %.3f | %s | %d | %s | %s | %s |\n", r.p.name, m.name,
				sec(x.wall), ratio(x.wall, ip.wall), sec(cpu), ratio(cpu, ipcpu), sec(x.use.Sys), x.use.Faults,
				mibRatio(x.use.PeakRSS, ip.use.PeakRSS), mibRatio(x.use.PeakPSS, ip.use.PeakPSS),
				mibRatio(x.use.PeakMemory, ip.use.PeakMemory))
		}
	}
	b.WriteString("\nThe runners: ")
	for i, m := range runnerMethods {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "**%s**, %s", m.name, m.description)
	}
	b.WriteString(". thindist runs as lld's DTLTO distributor without its cache. CPU, system time and page faults are " +
		"those of every process of the link and, for the server's runners, of the server and its workers over the link " +
		"(the server is no descendant of a link once it runs); peak RSS is the highest sum of the resident set sizes of all " +
		"those processes at once, sampled every 10 ms from /proc/PID/statm, idle workers of a warm server included: it counts " +
		"a page once for each process that maps it, so the LLVM libraries that the clang driver, lld and every worker map " +
		"count several times. Peak PSS is the highest sum of those processes' proportional set sizes (Pss of " +
		"/proc/PID/smaps_rollup), in which a page n processes map counts 1/n for each: a page only they map counts once, " +
		"one that other processes map too (a shared library) less, so that on a busy machine, whose other compilers map the LLVM libraries too, it counts little more than the processes' own heaps. Peak memory is the most memory those processes held at " +
		"once, each page once however many map it (the distinct page frames of /proc/PID/pagemap, as root; – without), " +
		"which is what the machine's RAM holds. Both are sampled in one more link of each runner, not timed, since walking " +
		"the page tables costs a millisecond or more of CPU per process and sample. Each memory figure is followed by " +
		"its ratio to in-process. The fork server's forked compilers are not always reaped " +
		"within the link's wait: its CPU, system time and faults may leave them out (its wall time and memory do not). " +
		"Targets (issue 32): lua5.4 and 7-Zip wall ≤ 1.03× and CPU ≤ 1.05× in-process; tiny generated modules ≤ 1.5×; " +
		"the README's 4-module demo on a warm server ≤ in-process + 20 ms; peak RSS ≤ 1.2× in-process; (issue 50) " +
		"peak PSS ≤ 1.2× in-process for lua5.4, 500 generated modules and the demo.\n")
}

// mib is n bytes in MiB, "–" for 0 (unknown).
func mib(n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// mibRatio is a bytes in MiB and its ratio to b to two places, "–" if a
// is unknown, without the ratio if b is.
func mibRatio(a, b int64) string {
	if a == 0 || b == 0 {
		return mib(a)
	}
	return fmt.Sprintf("%s (%.2f×)", mib(a), float64(a)/float64(b))
}
