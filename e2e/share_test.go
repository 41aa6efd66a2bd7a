package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/observe/record"
)

// TestDTLTOAndLinkShareTheCache: the README promises that DTLTO and
// `thindist link` produce the same backend actions, so a `thindist link` of
// the objects a DTLTO link compiled is served from the cache, and the other
// way round.
func TestDTLTOAndLinkShareTheCache(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	dtltoLink(t, dir, cache, "app")
	allHits := func(what string) {
		t.Helper()
		run := lastRecord(t, dir, cache)
		if len(run.Actions) != 2 {
			t.Fatalf("%s: %d actions, want 2", what, len(run.Actions))
		}
		for _, a := range run.Actions {
			if a.Where != record.WhereLocalCache {
				t.Errorf("%s: %s was %s, not a cache hit: %q %q", what, a.Module, a.Where, a.Miss, run.Commands)
			}
		}
	}
	thindistLink(t, dir, cache, "app2")
	allHits("thindist link after a DTLTO link")

	// The other way round, after a change that misses everywhere.
	recordProgram(t, dir, 5)
	thindistLink(t, dir, cache, "app3")
	dtltoLink(t, dir, cache, "app4")
	allHits("DTLTO link after a thindist link")
}

// TestCorruptEntryMissReason: a module recompiled because its cache entry
// could not be used (a corrupt object) is explained so, not by a difference
// from its last record.
func TestCorruptEntryMissReason(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	dtltoLink(t, dir, cache, "app")
	blobs, err := filepath.Glob(filepath.Join(cache, "cas", "*", "*"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("no blobs in the cache: %v", err)
	}
	for _, b := range blobs {
		os.Chmod(b, 0o644) // blobs are read-only
		if err := os.WriteFile(b, []byte("not what was stored"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	thindistLink(t, dir, cache, "app2")
	run := lastRecord(t, dir, cache)
	for _, m := range []string{"main.o", "libutil.a(util.o)"} {
		if got := missOf(t, run, m); !strings.Contains(got, "could not be used") || !strings.Contains(got, "corrupt") {
			t.Errorf("%s, recompiled over a corrupt entry, missed because %q", m, got)
		}
	}
}
