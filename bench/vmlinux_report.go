package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The vmlinux part's figures, as text and as the part "vmlinux" of
// RESULTS.md.

// ratios are thindist's walls over in-process's, pair by pair.
func (v *vmlinuxResult) ratios() []float64 {
	var rs []float64
	for i := range min(len(v.wall[0]), len(v.wall[1])) {
		rs = append(rs, ratio(v.wall[1][i], v.wall[0][i]))
	}
	slices.Sort(rs)
	return rs
}

func (v *vmlinuxResult) text() string {
	rs := v.ratios()
	if len(rs) == 0 {
		return "\nvmlinux.o: no timed pair (-runs 0)\n"
	}
	return fmt.Sprintf("\nvmlinux.o (%s): in-process %s, thindist link %s (medians of %d), pairs %.2f–%.2f×, median %.2f×; objects the same: %v\n",
		v.tree, sec(median(v.wall[0])), sec(median(v.wall[1])), len(v.wall[0]), rs[0], rs[len(rs)-1], median(rs), v.same)
}

func (v *vmlinuxResult) markdown(b *strings.Builder, jobs int) {
	b.WriteString("### The kernel's `vmlinux.o` link (issue 32)\n\n")
	same := "byte-identical"
	if !v.same {
		same = "**not** byte-identical"
	}
	fmt.Fprintf(b, "Kbuild's own `vmlinux.o` link of the tree given with `-kernel` (its `.vmlinux.o.cmd`, `ld.lld -r` of "+
		"`vmlinux.a`: %d backends), %d pairs, the order alternating: lld's in-process ThinLTO (`--thinlto-jobs=%d`) against "+
		"`thindist link --jobs=%d` on the workers of a warm per-user server, thindist's cache emptied of objects before each "+
		"link (a clean build). The two objects are %s.\n\n", v.inputs, len(v.wall[0]), jobs, jobs, same)
	rs := v.ratios()
	if len(rs) == 0 {
		b.WriteString("No timed pair (-runs 0).\n")
		return
	}
	b.WriteString("| in-process | thindist link | × (ratio of medians) | × per pair: median | lowest | highest |\n|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(b, "| %s | %s | %.3f | %.3f | %.3f | %.3f |\n\n", sec(median(v.wall[0])), sec(median(v.wall[1])),
		ratio(median(v.wall[1]), median(v.wall[0])), median(rs), rs[0], rs[len(rs)-1])
	s := v.split
	if s == nil {
		return
	}
	pct := func(a, b time.Duration) string { return fmt.Sprintf("%+.1f %%", 100*(ratio(a, b)-1)) }
	fmt.Fprintf(b, "Where the difference goes, in one more pair, untimed (lld with `--time-trace`): %s in-process, %s through thindist.\n\n", sec(s.lldWall), sec(s.thindistWall))
	fmt.Fprintf(b, "- **Backends**, the %d modules found in both: lld's backend threads %s in all; the workers' CPU for the same modules %s (%s), "+
		"their time in thindist's slots %s (%s).\n", s.matched, sec(s.inproc), sec(s.cpu), pct(s.cpu, s.inproc), sec(s.slot), pct(s.slot, s.inproc))
	fmt.Fprintf(b, "- **Per backend**: on the %d modules that take under 5 ms in-process, a worker spends a median %.2f ms more CPU "+
		"(clang's driver, the cc1 command line, reading the index shard and the module from files, writing the object to one: what in-process has no need of); a slot holds a "+
		"module a median %.2f ms longer than the worker's CPU (the round trip to the worker, waiting for a CPU, storing the object in the cache).\n",
		s.small, ms(s.fixed), ms(s.slotOverCPU))
	fmt.Fprintf(b, "- **Phases**: lld's in-process backends (\"Run ThinLTO\") %s of its %s; thindist's thin link %s, backends %s, final link %s.\n",
		sec(s.lldRun), sec(s.lldWall), sec(s.thinLink), sec(s.backends), sec(s.finalLink))
}
