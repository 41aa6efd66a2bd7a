package main

import (
	"fmt"
	"strings"
)

// The concurrent part's figures, as text and as the part "concurrent" of
// RESULTS.md.

func (c *concurrentResult) text(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: concurrent links on a fresh cache (%d modules), medians\n", name, c.modules)
	one := median(c.runs[0].wall)
	for _, r := range c.runs {
		w := median(r.wall)
		fmt.Fprintf(&b, "  %d at once, %-12s: %4d compiles of %d distinct backends, %s (%.2f× one link)\n",
			r.links, cacheKind(r.shared), r.compiles, r.distinct, sec(w), ratio(w, one))
	}
	return b.String()
}

func (rep *report) concurrentMarkdown(b *strings.Builder, rs []*projectResult) {
	b.WriteString("### Concurrent links of one program\n\n")
	fmt.Fprintf(b, "N `thindist link --jobs=%d`s of one program started at once on a fresh cache, as Make or CMake link many "+
		"executables of one library; medians of %d runs. **One cache**: the links share the cache directory, and claim what they "+
		"compile (`cache.Claims`, docs/design.md \"Identical compiles in flight\"). **A cache each**: what the links compiled before "+
		"claims. Compiles are counted by a wrapper around clang (the backends are exec'd through it); the wall time is from the first "+
		"link's start to the last one's end, against one link alone.\n\n", rep.jobs, rep.runs)
	b.WriteString("| project | links | cache | compiles | distinct backends | wall | × one link |\n|---|---:|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		c := r.concurrent
		one := median(c.runs[0].wall)
		for _, x := range c.runs {
			w := median(x.wall)
			fmt.Fprintf(b, "| %s | %d | %s | %d | %d | %s | %.2f |\n", r.p.build.Name, x.links, cacheKind(x.shared), x.compiles, x.distinct, sec(w), ratio(w, one))
		}
	}
}
