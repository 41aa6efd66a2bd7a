package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestConcurrentLinksCompileOnce: two and eight `thindist link`s of one
// program at once, sharing a fresh cache (as Make or CMake linking many
// executables of one library does): every backend is compiled once, by
// whichever link claimed it first; the others wait for it and take its
// object from the cache. A wrapper around clang counts the compiles.
// Every program is correct and the same.
func TestConcurrentLinksCompileOnce(t *testing.T) {
	testsupport.Slow(t, "ten real links")
	p := program(t, testprog.Options{Modules: 12, Seed: 31})
	for _, links := range []int{2, 8} {
		t.Run(fmt.Sprint(links), func(t *testing.T) {
			tools, cache := t.TempDir(), t.TempDir()
			log := filepath.Join(tools, "backends.log")
			cc := filepath.Join(tools, "clang")
			// A backend's line: its module, the input after -x ir.
			writeScript(t, cc, fmt.Sprintf(`#!/bin/sh
prev= mod= backend=
for a in "$@"; do
  case "$prev" in ir) mod=${a##*/};; esac
  case "$a" in -fthinlto-index=*) backend=1;; esac
  prev=$a
done
[ -z "$backend" ] || printf '%%s\n' "$mod" >> %s
exec %s "$@"
`, shq(log), shq(clang)))
			var wg sync.WaitGroup
			outs := make([]string, links)
			for i := range links {
				outs[i] = fmt.Sprintf("prog-%d-%d", links, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := append([]string{"link", "--jobs=2", "--", cc, "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
					cmd := exec.Command(thindist, append(args, "-o", outs[i])...)
					cmd.Dir, cmd.Env = p.Dir, testEnv(t, "THINDIST_CACHE_DIR="+cache)
					if msg, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("link %d of %d: %v\n%s", i, links, err, msg)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			compiles := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			distinct := slices.Compact(slices.Sorted(slices.Values(compiles)))
			if len(distinct) != len(p.Modules) || len(compiles) != len(distinct) {
				t.Errorf("%d links: %d compiles of %d distinct backends (the program has %d modules); want each compiled once:\n%s",
					links, len(compiles), len(distinct), len(p.Modules), data)
			}
			first, _ := os.ReadFile(filepath.Join(p.Dir, outs[0]))
			for _, out := range outs {
				if got := runProg(t, p, out); got != p.Want {
					t.Errorf("%s prints %q, want %q", out, got, p.Want)
				}
				if b, _ := os.ReadFile(filepath.Join(p.Dir, out)); !bytes.Equal(b, first) {
					t.Errorf("%s differs from %s", out, outs[0])
				}
			}
		})
	}
}
