package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestCacheStatsNoCacheClear checks `thindist cache stats` after cold and warm
// links, that --no-cache neither reads nor writes the cache, and that
// `thindist cache clear` empties it.
func TestCacheStatsNoCacheClear(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 5, Seed: 20})
	cold := r.link(link{})
	n := len(cold.modules())
	st := cacheStats(t, r.cacheDir)
	if e, h, m := statInt(t, st, "entries"), statInt(t, st, "hits"), statInt(t, st, "misses"); e != n || h != 0 || m != n {
		t.Errorf("after a cold link: entries %d hits %d misses %d, want %d 0 %d\n%v", e, h, m, n, n, st)
	}
	if !strings.Contains(st["size"], "KiB") && !strings.Contains(st["size"], "MiB") {
		t.Errorf("size %q", st["size"])
	}

	warm := r.link(link{})
	if len(warm.compiled) != 0 {
		t.Fatalf("warm link compiled %q", warm.compiled)
	}
	st = cacheStats(t, r.cacheDir)
	if h, m := statInt(t, st, "hits"), statInt(t, st, "misses"); h != n || m != n {
		t.Errorf("after a warm link: hits %d misses %d, want %d %d", h, m, n, n)
	}
	saved, err := time.ParseDuration(strings.Fields(st["saved CPU"])[0])
	if err != nil || saved <= 0 {
		t.Errorf("saved CPU %q, want the cold compiles' CPU time", st["saved CPU"])
	}
	if statInt(t, st, "evictions") != 0 {
		t.Errorf("evictions %v", st["evictions"])
	}

	before := cacheFiles(t, r.cacheDir)
	nc := r.link(link{distArgs: []string{"--no-cache"}})
	if !equalSets(nc.compiled, nc.modules()) {
		t.Errorf("--no-cache compiled %q, want every job", nc.compiled)
	}
	if s := nc.summary(t); s.cached != 0 || s.local != n {
		t.Errorf("--no-cache summary %+v", s)
	}
	st2 := cacheStats(t, r.cacheDir)
	if statInt(t, st2, "hits") != n || statInt(t, st2, "misses") != n || len(cacheFiles(t, r.cacheDir)) != len(before) {
		t.Errorf("--no-cache touched the cache: %v", st2)
	}
	// The environment variable too.
	cmd := r.linkCmd(link{out: "prog.env"})
	cmd.Env = append(cmd.Env, "THINDIST_NO_CACHE=1")
	os.WriteFile(r.log, nil, 0o644)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	r.skipJobFiles()
	if log := strings.Fields(string(readFile(t, r.log))); len(log) != n {
		t.Errorf("THINDIST_NO_CACHE=1 ran %d compilers, want %d", len(log), n)
	}

	out, err := exec.Command(thindist, "cache", "clear", "--cache-dir="+r.cacheDir).CombinedOutput()
	if err != nil {
		t.Fatalf("cache clear: %v\n%s", err, out)
	}
	if left := cacheFiles(t, r.cacheDir); len(left) != 0 {
		t.Errorf("cache clear left %d entries", len(left))
	}
	st = cacheStats(t, r.cacheDir)
	if statInt(t, st, "entries") != 0 || statInt(t, st, "hits") != 0 || statInt(t, st, "misses") != 0 {
		t.Errorf("after cache clear: %v", st)
	}
	after := r.link(link{})
	if !equalSets(after.compiled, after.modules()) {
		t.Errorf("after cache clear compiled %q, want every job", after.compiled)
	}
	if _, err := os.Stat(filepath.Join(r.cacheDir, "cas")); err != nil {
		t.Errorf("cache clear removed the cache's structure: %v", err)
	}
}
