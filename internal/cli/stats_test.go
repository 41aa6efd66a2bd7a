package cli

import (
	"regexp"
	"testing"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/observe/record"
)

// TestStatsAgreeWithCacheStats: `thindist stats` and `thindist cache
// stats` show one count of the local cache's hits and misses, the cache's
// own, also when it counted what no record did (a run with --no-record,
// an action that missed and then failed).
func TestStatsAgreeWithCacheStats(t *testing.T) {
	dir := t.TempDir()
	run := writeRecord(t, dir) // one recorded run...
	run.LocalCache = true
	run.Actions = []record.Action{{Module: "a.o", Where: record.WhereLocalCache}, {Module: "b.o", Where: record.WhereLocal},
		{Module: "c.o", Where: record.WhereFailed}}
	store := record.Open(dir)
	if err := store.AddTotals(run); err != nil {
		t.Fatal(err)
	}
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	// ...whose cache counted a hit and two misses (b.o; c.o, which failed),
	// and a run with --no-record: 3 hits, 5 misses in all.
	if err := disk.AddStats(cache.Stats{Hits: 1, Misses: 2}); err != nil {
		t.Fatal(err)
	}
	if err := disk.AddStats(cache.Stats{Hits: 2, Misses: 3}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": dir}
	code, stats, errOut := runCLI(t, env, "stats")
	if code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	code, cstats, errOut := runCLI(t, env, "cache", "stats")
	if code != 0 {
		t.Fatalf("cache stats: exit %d: %s", code, errOut)
	}
	num := func(text, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no %q in\n%s", re, text)
		}
		return m[1]
	}
	for _, c := range []struct{ stats, cache, want string }{
		{`Local cache hits +(\d+)`, `hits: +(\d+)`, "3"},
		{`Local cache misses +(\d+)`, `misses: +(\d+)`, "5"},
	} {
		s, cs := num(stats, c.stats), num(cstats, c.cache)
		if s != c.want || cs != c.want {
			t.Errorf("stats says %s, cache stats %s, want both %s (%s)\nstats:\n%s\ncache stats:\n%s", s, cs, c.want, c.stats, stats, cstats)
		}
	}
}
