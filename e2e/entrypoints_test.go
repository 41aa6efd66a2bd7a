package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestEntryPointsShareTheCache: the same link through `thindist link` and
// through lld's DTLTO with thindist as its distributor gives every backend
// the same key, whichever entry point fills the cache. The link names its
// driver clang-22 (as git's CC=clang-22 build does), where lld's job file
// names clang's own executable (.../bin/clang); and at LTO level 1 and for
// modules built -fno-pic, thindist adds to lld's jobs the options lld's
// job file leaves out (-funroll-loops, -fno-pic), which `thindist link`
// writes in its own commands.
func TestEntryPointsShareTheCache(t *testing.T) {
	testsupport.Slow(t, "12 links")
	needClang(t)
	bin := t.TempDir()
	// A driver spelled with its version, as Debian installs it.
	versioned := filepath.Join(bin, "clang-22")
	if err := os.Symlink(clang, versioned); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		compileFlags []string
		linkFlags    []string
	}{
		{"PIE", nil, []string{"-O2"}},
		{"LTO level 1", nil, []string{"-O2", "-Wl,--lto-O1"}},
		{"non-PIC", []string{"-fno-pic"}, []string{"-O2", "-no-pie"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := program(t, testprog.Options{Modules: 5, Seed: 7, ArchiveModules: 2}, tc.compileFlags...)
			viaLink := func(cache, out string) summary {
				t.Helper()
				args := append([]string{"--cache-dir=" + cache, "link", "--", versioned, "-flto=thin", "-fuse-ld=lld"}, tc.linkFlags...)
				args = append(append(args, p.Objects...), "-o", out)
				code, stderr := runThindist(t, p.Dir, nil, args...)
				if code != 0 {
					t.Fatalf("thindist link: exit %d\n%s", code, stderr)
				}
				return (&result{stderr: stderr}).summary(t)
			}
			viaDTLTO := func(cache, out string) summary {
				t.Helper()
				args := append([]string{"-flto=thin", "-fuse-ld=lld", "-fthinlto-distributor=" + thindist,
					"-Xthinlto-distributor=--cache-dir=" + cache}, tc.linkFlags...)
				args = append(append(args, p.Objects...), "-o", out)
				cmd := exec.Command(versioned, args...)
				cmd.Dir = p.Dir
				cmd.Env = testEnv(t)
				stderr, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr)
				}
				return (&result{stderr: string(stderr)}).summary(t)
			}
			entries := map[string]func(cache, out string) summary{"thindist link": viaLink, "lld's DTLTO": viaDTLTO}
			for _, order := range [][2]string{{"thindist link", "lld's DTLTO"}, {"lld's DTLTO", "thindist link"}} {
				cache := t.TempDir()
				cold := entries[order[0]](cache, "cold")
				if cold.jobs != p.Options.Modules || cold.cached != 0 {
					t.Fatalf("%s on a fresh cache: %+v, want %d jobs, none cached", order[0], cold, p.Options.Modules)
				}
				warm := entries[order[1]](cache, "warm")
				if warm.jobs != cold.jobs || warm.cached != warm.jobs {
					t.Errorf("%s after %s on its cache: %d jobs, %d cached, %d compiled; want every backend a hit",
						order[1], order[0], warm.jobs, warm.cached, warm.local)
				}
				if got := runProg(t, p, "warm"); got != p.Want {
					t.Errorf("%s's program prints %q, want %q", order[1], got, p.Want)
				}
			}
		})
	}
}
