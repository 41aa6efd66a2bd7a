package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// traceWheres returns the "where" of every job event of a --trace file.
func traceWheres(t *testing.T, path string) map[string]int {
	t.Helper()
	var tr struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(readFile(t, path), &tr); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			w, _ := e.Args["where"].(string)
			n[w]++
		}
	}
	return n
}

// canUnshare reports whether links can run in a PID namespace of their own,
// where lld gets a PID of one hex digit.
func canUnshare() bool {
	p, err := exec.LookPath("unshare")
	if err != nil {
		return false
	}
	return exec.Command(p, "--pid", "--fork", "true").Run() == nil
}

// TestCacheWarmRelink links the same objects twice (two lld processes, so two
// PIDs in every temporary name): the second link runs no compiler at all
// and produces a byte-identical program. With archives, lld copies members
// out under PID-bearing names and writes those names into the importers'
// shards, so this also checks the shard normalisation. A third link runs in
// a PID namespace, where lld's PID (and so every member and shard name) is
// shorter: the key must not depend on the shard's raw length either. And
// one more links into another directory.
func TestCacheWarmRelink(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    testprog.Options
	}{
		{"objects", testprog.Options{Modules: 6, Seed: 1}},
		{"archives", testprog.Options{Modules: 9, Seed: 2, ArchiveModules: 4, ThinArchiveModules: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.o)
			coldTrace := filepath.Join(r.tools, "cold.json")
			cold := r.link(link{distArgs: []string{"--trace=" + coldTrace}})
			all := cold.modules()
			if len(all) != tc.o.Modules {
				t.Fatalf("%d jobs in the job file, want %d: %q", len(all), tc.o.Modules, all)
			}
			if !equalSets(cold.compiled, all) {
				t.Errorf("cold link compiled %q, want every module %q", cold.compiled, all)
			}
			if s := cold.summary(t); s.cached != 0 || s.local != len(all) || s.failed != 0 {
				t.Errorf("cold link summary %+v", s)
			}
			if w := traceWheres(t, coldTrace); w["local"] != len(all) {
				t.Errorf("cold trace: %v, want %d local", w, len(all))
			}
			ref := keep(t, cold, "prog.cold")
			if got := runProg(t, r.p, cold.out); got != r.p.Want {
				t.Fatalf("the program prints %q, want %q", got, r.p.Want)
			}

			warmTrace := filepath.Join(r.tools, "warm.json")
			warm := r.link(link{distArgs: []string{"--trace=" + warmTrace}})
			if len(warm.compiled) != 0 {
				t.Errorf("warm relink compiled %q, want nothing", warm.compiled)
			}
			if s := warm.summary(t); s.cached != len(all) || s.local != 0 {
				t.Errorf("warm relink summary %+v, want %d cached", s, len(all))
			}
			if w := traceWheres(t, warmTrace); w["cache"] != len(all) {
				t.Errorf("warm trace: %v, want %d where=cache", w, len(all))
			}
			sameBinary(t, "warm relink", readFile(t, warm.out), ref)

			// Into another directory: lld copies archive members out next
			// to the output, so their paths, and their places in the shards'
			// module tables, change.
			if err := os.MkdirAll(filepath.Join(r.p.Dir, "elsewhere"), 0o755); err != nil {
				t.Fatal(err)
			}
			moved := r.link(link{out: "elsewhere/prog"})
			if len(moved.compiled) != 0 {
				t.Errorf("relink into another directory compiled %q, want nothing", moved.compiled)
			}
			sameBinary(t, "relink into another directory", readFile(t, moved.out), ref)

			if !canUnshare() {
				t.Log("unshare --pid unavailable: the short-PID relink is not checked")
				return
			}
			ns := r.link(link{prefix: []string{"unshare", "--pid", "--fork"}})
			if len(ns.compiled) != 0 {
				t.Errorf("relink under another PID length compiled %q, want nothing", ns.compiled)
			}
			sameBinary(t, "relink under another PID length", readFile(t, ns.out), ref)
		})
	}
}
