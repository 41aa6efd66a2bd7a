package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/realproj"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestCacheWarmRelinkLua links a real project, Debian's lua5.4 (lua.o plus the
// regular static archive liblua.a, 30-odd members), twice and, where
// possible, a third time from a PID namespace: the relinks run no
// compiler and produce the same interpreter, which still works.
// buildLua builds Debian's lua5.4 as ThinLTO bitcode in dir, skipping t
// where clang or the source is missing (failing it instead under CI=true).
func buildLua(t *testing.T, dir string) *realproj.Build {
	t.Helper()
	needClang(t)
	src, err := realproj.FindSource(realproj.LuaPackage)
	if err != nil {
		if errors.Is(err, realproj.ErrNoSource) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	b, err := realproj.BuildLua(context.Background(), realproj.DefaultToolchain(), src, dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCacheWarmRelinkLua(t *testing.T) {
	testsupport.Slow(t, "builds lua5.4 with clang 22 and links it")
	root := t.TempDir()
	b := buildLua(t, filepath.Join(root, "prog"))
	p := &testprog.Program{Dir: b.Dir, Objects: append(append([]string{}, b.Objects...), b.Archives...)}
	r := rigFor(t, p, root)
	l := link{out: "lua", flags: append(append([]string{}, b.CFlags...), b.Libs...)}

	cold := r.link(l)
	if len(cold.jobs) != b.Modules {
		t.Errorf("%d jobs, want %d modules", len(cold.jobs), b.Modules)
	}
	if !equalSets(cold.compiled, cold.modules()) {
		t.Errorf("cold link compiled %d of %d jobs", len(cold.compiled), len(cold.jobs))
	}
	ref := keep(t, cold, "lua.cold")
	check := func(what, exe string) {
		t.Helper()
		out, err := exec.Command(exe, "-e", `print(string.format("%d %s", 6*7, ("x"):rep(3)))`).CombinedOutput()
		if err != nil || string(out) != "42 xxx\n" {
			t.Errorf("%s: lua prints %q (%v)", what, out, err)
		}
	}
	check("cold", cold.out)

	warm := r.link(l)
	if len(warm.compiled) != 0 {
		t.Errorf("warm relink compiled %q, want nothing", warm.compiled)
	}
	if s := warm.summary(t); s.cached != len(warm.jobs) {
		t.Errorf("warm relink summary %+v", s)
	}
	sameBinary(t, "lua warm relink", readFile(t, warm.out), ref)
	check("warm", warm.out)

	if canUnshare() {
		l.prefix = []string{"unshare", "--pid", "--fork"}
		ns := r.link(l)
		if len(ns.compiled) != 0 {
			t.Errorf("relink under another PID length compiled %q, want nothing", ns.compiled)
		}
		sameBinary(t, "lua relink under another PID length", readFile(t, ns.out), ref)
	}
}
