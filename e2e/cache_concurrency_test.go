package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestCacheConcurrentLinks runs four links of the same program at once, each
// into its own output directory, all sharing one cache directory: a cold
// round (every link stores the same entries at the same time), a warm one,
// and a cold one again after `cache clear`. Every program must be
// byte-identical to an uncached link, and the cache whole afterwards.
func TestCacheConcurrentLinks(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 8, Seed: 5, ArchiveModules: 2, ThinArchiveModules: 2})
	refRes := r.linkQuiet(link{out: "prog.ref", distArgs: []string{"--no-cache"}})
	ref := readFile(t, refRes.out)
	if got := runProg(t, r.p, refRes.out); got != r.p.Want {
		t.Fatalf("the reference program prints %q, want %q", got, r.p.Want)
	}
	for round, clear := range []bool{true, false, true, false} {
		if clear {
			if out, err := exec.Command(thindist, "cache", "clear", "--cache-dir="+r.cacheDir).CombinedOutput(); err != nil {
				t.Fatalf("cache clear: %v\n%s", err, out)
			}
		}
		var wg sync.WaitGroup
		results := make([]*result, 4)
		errs := make([]error, 4)
		for i := range results {
			out := filepath.Join(fmt.Sprintf("out%d", i), "prog")
			if err := os.MkdirAll(filepath.Join(r.p.Dir, filepath.Dir(out)), 0o755); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := r.linkCmd(link{out: out})
				if b, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("%v\n%s", err, b)
					return
				}
				results[i] = &result{out: filepath.Join(r.p.Dir, out)}
			}()
		}
		wg.Wait()
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("round %d link %d failed: %v", round, i, errs[i])
			}
			sameBinary(t, fmt.Sprintf("round %d link %d", round, i), readFile(t, res.out), ref)
		}
		checkCacheIntact(t, r.cacheDir)
		if n := len(cacheFiles(t, r.cacheDir)); n == 0 {
			t.Fatalf("round %d: the cache is empty", round)
		}
	}
	// The shared cache serves a later link into a directory of the rounds
	// completely.
	r.skipJobFiles()
	res := r.link(link{out: "out0/prog.after"})
	if len(res.compiled) != 0 {
		t.Errorf("a link after the concurrent rounds compiled %q, want nothing", res.compiled)
	}
	sameBinary(t, "link after the concurrent rounds", readFile(t, res.out), readFile(t, filepath.Join(r.p.Dir, "out0/prog")))
	// Into another directory it may compile again, and its program is the
	// one an uncached link writes there: lld copies archive members out
	// next to the output, so their paths ("out0/libfoo.a(m3.o at
	// 126).3.1F2E.o") sort elsewhere among the other modules' than
	// "libfoo.a(...)" do, and a backend imports from its modules in the
	// order of their paths, which can show in its object.
	res = r.link(link{out: "prog.after"})
	sameBinary(t, "link into another directory after the concurrent rounds", readFile(t, res.out), ref)
	// Every hit and miss of the rounds is counted: 4 links x 8 jobs in
	// each round, whatever the interleaving (the last cleared round and
	// the ones after it), and the two links after them.
	st := cacheStats(t, r.cacheDir)
	if h, m := statInt(t, st, "hits"), statInt(t, st, "misses"); h+m != 2*4*8+2*8 {
		t.Errorf("stats count %d hits + %d misses, want %d lookups since the last clear", h, m, 2*4*8+2*8)
	}
}
