package main

import (
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestCountShipped: only the toolchain's files count, each file's bytes
// every time it is received, and a file received again counts once as
// uploaded twice.
func TestCountShipped(t *testing.T) {
	shipped := map[string]bool{"a": true, "b": true, "c": true}
	got := countShipped([]reapitest.UploadRecord{
		{Hash: "a", SizeBytes: 100, WireBytes: 40},
		{Hash: "module", SizeBytes: 1000, WireBytes: 900},
		{Hash: "b", SizeBytes: 10, WireBytes: 10},
		{Hash: "a", SizeBytes: 100, WireBytes: 40},
		{Hash: "a", SizeBytes: 100, WireBytes: 40},
	}, shipped)
	want := shippedUploads{files: 2, raw: 310, wire: 130, twice: 1}
	if got != want {
		t.Errorf("countShipped = %+v, want %+v", got, want)
	}
}

// TestToolchainRow: the table's row holds the medians over the pairs,
// client CPU per action, and the ratios inputs / installed.
func TestToolchainRow(t *testing.T) {
	pair := func(inst, in time.Duration, instCPU, inCPU time.Duration, firstWire, secondWire int64, twice int) toolchainRun {
		return toolchainRun{
			first:     shippedUploads{wire: firstWire, twice: twice},
			second:    shippedUploads{wire: secondWire},
			installed: toolchainLink{wall: inst, cpu: instCPU, bytesUp: 4, selfMS: float64(instCPU) / 2e7},
			inputs:    toolchainLink{wall: in, cpu: inCPU, bytesUp: 7, selfMS: float64(inCPU) / 2e7},
		}
	}
	c := &toolchainResult{actions: 10, files: 21, raw: 278_000_000, zstd: 98_000_000, runs: []toolchainRun{
		pair(10*time.Second, 11*time.Second, 400*time.Millisecond, 420*time.Millisecond, 97_000_000, 0, 0),
		pair(20*time.Second, 21*time.Second, 800*time.Millisecond, 900*time.Millisecond, 96_000_000, 0, 1),
		pair(12*time.Second, 12*time.Second, 500*time.Millisecond, 500*time.Millisecond, 99_000_000, 3, 0),
	}}
	row := c.row("lua")
	for _, want := range []string{
		"| lua | 10 | 21, 278.00 MB, 98.00 MB |",
		"| 97.00 MB (0.9898 ×), 1 |", // the median first upload; a file uploaded twice in any pair shows
		"| 0 B |",
		"| 12.000 s, 12.000 s, 1.000 |",
		"| 50.0 ms, 50.0 ms, 1.000; 25.00 ms, 25.00 ms, 1.000 |", // per action: the median CPU / 10
		"| 4 B, 7 B, 1.750 |",
	} {
		if !strings.Contains(row, want) {
			t.Errorf("row lacks %q:\n%s", want, row)
		}
	}
	if n := strings.Count(row, "|"); n != 9 {
		t.Errorf("row has %d cells, want 8:\n%s", n-1, row)
	}
	rep := &report{jobs: 2}
	var b strings.Builder
	rep.toolchainMarkdown(&b, []*projectResult{{p: &project{name: "lua"}, toolchain: c}})
	lines := strings.Split(b.String(), "\n")
	if head, sep := strings.Count(lines[4], "|"), strings.Count(lines[5], "|"); head != 9 || sep != 9 {
		t.Errorf("header and separator have %d and %d bars, want the row's 9:\n%s", head, sep, b.String())
	}
}
