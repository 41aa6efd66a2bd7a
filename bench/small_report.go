package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/source/thinlink"
)

// The small part's figures, as text and as the part "small" of
// RESULTS.md.

func (s *smallResult) text(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: small links (ld.lld -r of its smallest modules), %d runs each, medians\n", name, len(s.wall[0][0]))
	for i, l := range s.links {
		ip := median(s.wall[i][0])
		fmt.Fprintf(&b, "  %3d modules %9s:", len(l.modules), thinlink.Size(l.bytes))
		for m, name := range smallMethods {
			w := median(s.wall[i][m])
			fmt.Fprintf(&b, "  %s %.1f ms (%.2f×)", name, ms(w), ratio(w, ip))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (rep *report) smallMarkdown(b *strings.Builder, rs []*projectResult) {
	b.WriteString("### Small links: in-process, left to lld, distributed\n\n")
	fmt.Fprintf(b, "`ld.lld -r --thinlto-jobs=%d` of a project's smallest bitcode modules, growing to all of them; "+
		"medians of %d links each, interleaved. **In-process**: lld's own ThinLTO. **Left to lld**: `thindist link` with an "+
		"`--in-process-below` above the link's bitcode, which runs the command as given (replacing itself with it): what "+
		"thindist's start and decision add. **thindist-link**: the same through the thindist-link front, which decides with "+
		"thindist's code without thindist's start. **Distributed**: `thindist link --in-process-below=0`, on the workers of a warm "+
		"per-user server, with thindist's cache emptied of objects before each link (a first build). The links left to lld make the "+
		"object in-process makes, byte for byte (checked); **same** says whether the distributed one does too. "+
		"`--in-process-below`'s default is 256 KiB.\n\n", rep.jobs, rep.runs)
	b.WriteString("| project | modules | bitcode | in-process | left to lld | × | thindist-link | × | distributed | × | same |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		s := r.small
		for i, l := range s.links {
			ip, left, front, dist := median(s.wall[i][0]), median(s.wall[i][1]), median(s.wall[i][2]), median(s.wall[i][smallDistributed])
			same := "yes"
			if !s.same[i] {
				same = "no"
			}
			fmt.Fprintf(b, "| %s | %d | %s | %.1f ms | %.1f ms | %.2f | %.1f ms | %.2f | %.1f ms | %.2f | %s |\n", r.p.build.Name, len(l.modules),
				thinlink.Size(l.bytes), ms(ip), ms(left), ratio(left, ip), ms(front), ratio(front, ip), ms(dist), ratio(dist, ip), same)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
