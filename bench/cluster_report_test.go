package main

import (
	"strings"
	"testing"
	"time"
)

// TestVsLocalMarkdown: the comparison with this machine alone takes the
// median of each side, says NO where the remote link is slower, and names
// a project left out and why.
func TestVsLocalMarkdown(t *testing.T) {
	runs := func(walls ...time.Duration) []clusterRun {
		var rs []clusterRun
		for _, w := range walls {
			rs = append(rs, clusterRun{wall: w})
		}
		return rs
	}
	s := time.Second
	measured := &projectResult{p: &project{name: "measured"}, cluster: &clusterResult{
		localOnly: []time.Duration{10 * s, 12 * s, 11 * s},
		// One slot: faster (median 9 s); slow cluster: slower (median 12 s).
		vsLocal: [][]clusterRun{runs(20*s, 9*s, 8*s), runs(13*s, 12*s, 5*s)},
	}}
	skipped := &projectResult{p: &project{name: "skipped"}, cluster: &clusterResult{vsLocalSkipped: "too long"}}
	var b strings.Builder
	vsLocalMarkdown(&b, []*projectResult{measured, skipped})
	out := b.String()
	for _, want := range []string{
		"| measured | one worker slot | 1 | 5ms | 1 | 9.000 s | 11.000 s | 0.818 | yes |",
		"| measured | every slot 10× slower | 16 | 25ms | 1 | 12.000 s | 11.000 s | 1.091 | NO |",
		"Not measured for skipped: too long.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	var none strings.Builder
	vsLocalMarkdown(&none, []*projectResult{skipped})
	if none.Len() != 0 {
		t.Errorf("a table with no project measured:\n%s", none.String())
	}
}
