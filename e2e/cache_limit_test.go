package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

func cacheBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, s := range cacheFiles(t, dir) {
		n += s
	}
	return n
}

// TestCacheSizeLimit fills a cache shared by three programs past --cache-size:
// A and B are linked and their entries aged by two hours (the cache keeps
// use times only to within an hour, so uses minutes apart do not order
// eviction), A relinked (its entries become the most recently used), then
// C is linked with a limit of what A and B took. The cache must shrink to
// the limit by evicting B, the least recently used: A and C still hit
// completely, B recompiles.
func TestCacheSizeLimit(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "cache")
	a := newRig(t, testprog.Options{Modules: 6, Seed: 10})
	b := newRig(t, testprog.Options{Modules: 6, Seed: 11})
	c := newRig(t, testprog.Options{Modules: 4, Seed: 12})
	for _, r := range []*rig{a, b, c} {
		r.cacheDir = shared
	}
	a.link(link{})
	sizeA := cacheBytes(t, shared)
	b.link(link{})
	limit := cacheBytes(t, shared)
	t.Logf("A takes %d bytes, A and B %d", sizeA, limit)
	ageCache(t, shared, 2*time.Hour)
	if res := a.link(link{}); len(res.compiled) != 0 {
		t.Fatalf("relinking A compiled %q", res.compiled)
	}

	c.link(link{distArgs: []string{fmt.Sprintf("--cache-size=%d", limit)}})
	if got := cacheBytes(t, shared); got > limit {
		t.Errorf("the cache holds %d bytes after the link, more than --cache-size=%d", got, limit)
	}
	checkCacheIntact(t, shared)
	if ev := statInt(t, cacheStats(t, shared), "evictions"); ev == 0 {
		t.Errorf("cache stats report no evictions")
	}
	for _, x := range []struct {
		name string
		r    *rig
	}{{"A", a}, {"C", c}} {
		if res := x.r.link(link{}); len(res.compiled) != 0 {
			t.Errorf("%s, recently used, lost entries: its relink compiled %q", x.name, res.compiled)
		}
	}
	if res := b.link(link{}); len(res.compiled) == 0 {
		t.Errorf("B, the least recently used, kept every entry although the cache had to shrink")
	} else {
		t.Logf("B recompiled %d of %d jobs", len(res.compiled), len(res.jobs))
	}
}

// ageCache moves the use time of every entry in the cache dir back by d,
// as if its last use were d ago.
func ageCache(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	for rel := range cacheFiles(t, dir) {
		p := filepath.Join(dir, rel)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		old := fi.ModTime().Add(-d)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}
