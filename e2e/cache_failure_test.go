package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestCacheFailuresNotStored: a backend that fails (a non-zero exit, or exit 0
// with "Error running ThinLTO backend" and an empty object, as clang does
// when an import is missing) fails the link and is not stored; the next
// link, with the same compiler (same key), compiles exactly that module
// again and reuses what the failed link stored for the others.
func TestCacheFailuresNotStored(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 5, Seed: 30})
	trigger := filepath.Join(r.tools, "fail-module")
	// A wrapper that fails the backend of the module named in the trigger
	// file, the way the trigger file's second line says.
	writeScript(t, r.wrapper, fmt.Sprintf(`#!/bin/sh
out=""; prev=""; idx=""
for a in "$@"; do
  case "$a" in -fthinlto-index=*) idx="${a#-fthinlto-index=}"; printf '%%s\n' "$idx" >> %[1]s;; esac
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
if [ -f %[2]s ]; then
  mod=$(sed -n 1p %[2]s); how=$(sed -n 2p %[2]s)
  case "$idx" in "$mod".*)
    if [ "$how" = exit ]; then echo "injected failure" >&2; exit 1; fi
    echo "error: Error running ThinLTO backend: injected" >&2; : > "$out"; exit 0;;
  esac
fi
exec %[3]s "$@"
`, shq(r.log), shq(trigger), shq(clang)))

	for _, how := range []string{"exit", "marker"} {
		t.Run(how, func(t *testing.T) {
			os.RemoveAll(r.cacheDir)
			if err := os.WriteFile(trigger, []byte("m1\n"+how+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(r.log, nil, 0o644)
			cmd := r.linkCmd(link{})
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the link succeeded although m1's backend failed:\n%s", out)
			}
			if !strings.Contains(string(out), "m1") {
				t.Errorf("the failure does not name the module:\n%s", out)
			}
			r.jobFile(filepath.Join(r.p.Dir, "prog"))
			if strings.Contains(string(out), "cached") && !strings.Contains(string(out), " 0 cached") {
				t.Errorf("a failing link served results from an empty cache:\n%s", out)
			}

			// Nothing of the failure is stored: every record names a
			// non-empty object.
			records, blobs := objectEntries(t, r.cacheDir)
			for i, b := range blobs {
				if fi, err := os.Stat(filepath.Join(r.cacheDir, b)); err != nil || fi.Size() == 0 {
					t.Errorf("record %s names a missing or empty object", records[i])
				}
			}
			checkCacheIntact(t, r.cacheDir)
			stored := len(records)

			os.Remove(trigger)
			res := r.link(link{})
			// thindist stops the other backends at the first failure, so
			// only those that finished before it were stored.
			if !contains(res.compiled, "m1.o") {
				t.Errorf("the relink did not compile m1.o again (compiled %q): the failure was served from the cache", res.compiled)
			}
			if want := len(res.jobs) - stored; len(res.compiled) != want {
				t.Errorf("the relink compiled %d jobs, want %d (%d were stored by the failed link)", len(res.compiled), want, stored)
			}
			if got := runProg(t, r.p, res.out); got != r.p.Want {
				t.Errorf("the program prints %q, want %q", got, r.p.Want)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
