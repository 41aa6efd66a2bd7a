package main

import (
	"fmt"
	"strings"
	"time"
)

// The toolchain part's figures (issue 49), as text and as the part
// "toolchain" of RESULTS.md.

// toolchainMedians are a result's medians over its pairs.
type toolchainMedians struct {
	installedWall, inputsWall time.Duration
	installedCPU, inputsCPU   time.Duration // client CPU per action
	installedSelf, inputsSelf float64       // thindist's own CPU per action, ms
	installedUp, inputsUp     int64
	firstWire, secondWire     int64 // toolchain bytes up, first and second link
	twice                     int   // the most files any first link uploaded twice
}

func (c *toolchainResult) medians() toolchainMedians {
	var m toolchainMedians
	var iw, nw, ic, nc []time.Duration
	var iu, nu, fw, sw []int64
	var is, ns []float64
	n := time.Duration(max(1, c.actions))
	for _, r := range c.runs {
		iw, nw = append(iw, r.installed.wall), append(nw, r.inputs.wall)
		ic, nc = append(ic, r.installed.cpu/n), append(nc, r.inputs.cpu/n)
		iu, nu = append(iu, r.installed.bytesUp), append(nu, r.inputs.bytesUp)
		is, ns = append(is, r.installed.selfMS), append(ns, r.inputs.selfMS)
		fw, sw = append(fw, r.first.wire), append(sw, r.second.wire)
		m.twice = max(m.twice, r.first.twice)
	}
	m.installedWall, m.inputsWall = median(iw), median(nw)
	m.installedCPU, m.inputsCPU = median(ic), median(nc)
	m.installedUp, m.inputsUp = median(iu), median(nu)
	m.installedSelf, m.inputsSelf = median(is), median(ns)
	m.firstWire, m.secondWire = median(fw), median(sw)
	return m
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

// over is a / b, 0 when b is.
func over(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (c *toolchainResult) text(name string) string {
	var b strings.Builder
	m := c.medians()
	fmt.Fprintf(&b, "\n%s: compiler shipped as inputs vs installed (%d actions, %d pairs; load average %s to %s)\n",
		name, c.actions, len(c.runs), c.load[0], c.load[1])
	fmt.Fprintf(&b, "  tree: %d files, %s, %s with zstd (fastest); first link uploaded %s of it (%.4f × zstd), %d files twice; second link %d B\n",
		c.files, mb(c.raw), mb(c.zstd), mb(m.firstWire), over(float64(m.firstWire), float64(c.zstd)), m.twice, m.secondWire)
	fmt.Fprintf(&b, "  warm: wall %s installed, %s inputs (%.3f ×); client CPU per action %.1f ms, %.1f ms (%.3f ×), thindist's own %.2f ms, %.2f ms (%.3f ×); bytes up %d, %d (%.3f ×)\n",
		sec(m.installedWall), sec(m.inputsWall), ratio(m.inputsWall, m.installedWall),
		ms(m.installedCPU), ms(m.inputsCPU), ratio(m.inputsCPU, m.installedCPU),
		m.installedSelf, m.inputsSelf, over(m.inputsSelf, m.installedSelf),
		m.installedUp, m.inputsUp, over(float64(m.inputsUp), float64(m.installedUp)))
	for i, r := range c.runs {
		fmt.Fprintf(&b, "  pair %d: installed %s (others %2.0f%%), inputs %s (others %2.0f%%); %s | %s\n", i+1,
			sec(r.installed.wall), 100*r.installed.others, sec(r.inputs.wall), 100*r.inputs.others, r.installed.summary, r.inputs.summary)
	}
	if len(c.runs) > 0 {
		fmt.Fprintf(&b, "  first link: %s\n  second link: %s\n", c.runs[0].firstLink, c.runs[0].secondLink)
	}
	return b.String()
}

// toolchainMarkdown writes the part "toolchain" (issue 49), compact: one
// row per project.
func (rep *report) toolchainMarkdown(b *strings.Builder, rs []*projectResult) {
	c0 := rs[0].toolchain
	fmt.Fprintf(b, "### Compiler shipped as inputs vs installed (issue 49), median of %d pairs\n\n", len(c0.runs))
	fmt.Fprintf(b, "`-parts toolchain`: the test double twice, chrooted workers for `--remote-toolchain=inputs`, host workers for `installed`; "+
		"every backend remote, `--remote-jobs=%d`. **First**: a new server's empty CAS, empty local cache: the tree's bytes received "+
		"against zstd (fastest, thindist's level) of its files; **second**: another empty local cache, a new ActionCache instance. "+
		"**Warm**: each server's CAS warm, a new ActionCache instance (all execute), a local cache with only the digest table; "+
		"client CPU is the link's (driver, lld, thindist), thindist's own from its summary. Load average %s to %s: other work shared this %d-CPU machine.\n\n",
		c0.remoteJobs, c0.load[0], c0.load[1], rep.jobs)
	b.WriteString("| project | actions | tree: files, size, zstd | first: up (≤ zstd), files twice | second: up | warm wall installed, inputs, × (≤ 1.05) | client CPU per action, × (≤ 1.05); thindist's own | warm bytes up, × |\n")
	b.WriteString("|---|---:|---|---|---:|---|---|---|\n")
	for _, r := range rs {
		b.WriteString(r.toolchain.row(r.p.name))
	}
}

// row is the project's line of the toolchain table.
func (c *toolchainResult) row(name string) string {
	m := c.medians()
	return fmt.Sprintf("| %s | %d | %d, %s, %s | %s (%.4f ×), %d | %d B | %s, %s, %.3f | %.1f ms, %.1f ms, %.3f; %.2f ms, %.2f ms, %.3f | %d B, %d B, %.3f |\n",
		name, c.actions, c.files, mb(c.raw), mb(c.zstd), mb(m.firstWire), over(float64(m.firstWire), float64(c.zstd)), m.twice,
		m.secondWire, sec(m.installedWall), sec(m.inputsWall), ratio(m.inputsWall, m.installedWall),
		ms(m.installedCPU), ms(m.inputsCPU), ratio(m.inputsCPU, m.installedCPU),
		m.installedSelf, m.inputsSelf, over(m.inputsSelf, m.installedSelf),
		m.installedUp, m.inputsUp, over(float64(m.inputsUp), float64(m.installedUp)))
}
