package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestRunStatsAtTheEnd: the counters of the chain's parts are read once
// the run is over: the local cache's totals count the run's lookups, and the remote summary line counts the results stored after the
// last action ended (the write-behind drained first).
func TestRunStatsAtTheEnd(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 5})
	dir := t.TempDir()
	cfg := &config.Config{Jobs: 2, Progress: "never", NoForkServer: true, CacheDir: dir}
	link(t, cfg, actions)
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := disk.Stats()
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(actions))
	if st.Hits != 0 || st.Misses != n {
		t.Errorf("the cache's totals: %d hits and %d misses, want 0 and %d", st.Hits, st.Misses, n)
	}

	_, addr := reapitest.StartT(t, reapitest.Options{})
	rcfg := cacheOnlyRemote(addr)
	rcfg.Remote.Upload = true
	out := link(t, rcfg, actions)
	want := fmt.Sprintf("0 cache hits, %d misses; %d results stored in ", n, n)
	if !strings.Contains(out, want) {
		t.Errorf("the remote summary line does not say %q:\n%s", want, out)
	}
	if out := link(t, rcfg, actions); !strings.Contains(out, fmt.Sprintf("%d cache hits, 0 misses", n)) {
		t.Errorf("a second link did not hit every action:\n%s", out)
	}
}
