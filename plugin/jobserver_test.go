package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestPluginJobserverWarningOncePerBuild runs three plugin links in recipes
// of one `make -j2` that do not share make's jobserver (no '+', as CMake's):
// the warning that the jobserver is not available comes once for the
// build, not once per link, and not at all when silenced.
func TestPluginJobserverWarningOncePerBuild(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir, want := project(t)
	so, h := tools(t)
	var mk strings.Builder
	mk.WriteString("all: l1 l2 l3\n.PHONY: l1 l2 l3\n")
	for i := 1; i <= 3; i++ {
		native := fmt.Sprintf("native%d", i)
		if err := os.Mkdir(filepath.Join(dir, native), 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{h, "--lld", filepath.Join(llvmBin, "ld.lld"), "--link-arg", "--undefined=main",
			"--dir", native, so}, objects...)
		fmt.Fprintf(&mk, "l%d:\n\t%s\n", i, action.ShellQuote(args))
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const warning = "make's jobserver is not available"
	for _, tc := range []struct {
		env  []string
		want int
	}{{nil, 1}, {[]string{"THINDIST_NO_JOBSERVER_WARNING=1"}, 0}} {
		cmd := exec.Command("make", "-j2")
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "MAKEFLAGS=", "XDG_RUNTIME_DIR="+t.TempDir(), "THINDIST_COMPILER="+clang,
			"THINDIST_CACHE_DIR="+t.TempDir()), tc.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -j2 %v: %v\n%s", tc.env, err, out)
		}
		if n := strings.Count(string(out), warning); n != tc.want {
			t.Errorf("make -j2 %v: the jobserver warning came %d times, want %d:\n%s", tc.env, n, tc.want, out)
		}
	}
	// Each link's objects make the program.
	for i := 1; i <= 3; i++ {
		objs, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("native%d", i), "*.native.o"))
		if len(objs) != len(objects) {
			t.Fatalf("link %d: native objects %v, want %d", i, objs, len(objects))
		}
		prog := fmt.Sprintf("./prog%d", i)
		mustRun(t, dir, clang, append([]string{"-fuse-ld=lld", "-o", prog}, objs...)...)
		if got := mustRun(t, dir, prog); got != want {
			t.Errorf("prog%d prints %q, want %q", i, got, want)
		}
	}
}
