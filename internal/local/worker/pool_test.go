package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestPoolChecksAChangedCompilerAgain: the compiler check is kept per
// compiler file: a path that now resolves to another clang (a symbolic
// link retargeted, as update-alternatives does) is checked again, and so
// is a compiler file rewritten in place; an unchanged one is not.
func TestPoolChecksAChangedCompilerAgain(t *testing.T) {
	path := testprog.Worker(t)
	clang22, clang19 := filepath.Join(testprog.LLVMBin(), "clang"), "/usr/lib/llvm-19/bin/clang"
	testprog.NeedLLVM(t, filepath.Dir(clang19), "clang")
	dir := t.TempDir()
	cc := filepath.Join(dir, "cc")
	p := NewPool(Options{Path: path})
	defer p.Close()
	checked := func(file string) time.Time {
		for _, v := range p.Compilers() {
			if v.File == file {
				return v.At
			}
		}
		return time.Time{}
	}
	var first time.Time
	for i, target := range []string{clang22, clang19, clang22} {
		os.Remove(cc)
		if err := os.Symlink(target, cc); err != nil {
			t.Fatal(err)
		}
		why := p.Check(context.Background(), cc, dir, os.Environ())
		if on19 := i == 1; on19 != strings.Contains(why, `is "Debian clang version 19`) || !on19 && why != "" {
			t.Errorf("%s → %s: the check says %q", cc, target, why)
		}
		if i == 0 {
			first = checked(clang22)
		}
	}
	if again := checked(clang22); again.IsZero() || !again.Equal(first) {
		t.Errorf("%s checked at %v, then at %v: want it checked once", clang22, first, again)
	}
	// A wrapper script fails the check (its resource directory is not
	// clang's); rewritten, it is checked again.
	script := filepath.Join(dir, "wrapper")
	var at [2]time.Time
	for i, body := range []string{"#!/bin/sh\nexec " + clang22 + " \"$@\"\n", "#!/bin/sh\n# v2\nexec " + clang22 + " \"$@\"\n"} {
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		if why := p.Check(context.Background(), script, dir, os.Environ()); !strings.Contains(why, "resource directory") {
			t.Errorf("the wrapper script: the check says %q", why)
		}
		at[i] = checked(script)
	}
	if !at[1].After(at[0]) {
		t.Errorf("the rewritten wrapper was checked at %v, before at %v: want it checked again", at[1], at[0])
	}
}

// TestPoolChanged: a file a running worker executes, replaced on disk (as
// an upgrade replaces libclang-cpp), is reported.
func TestPoolChanged(t *testing.T) {
	orig := testprog.Worker(t)
	path := filepath.Join(t.TempDir(), "thindist-worker")
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, cmds := backends(t, map[string]string{"a": bigFrame})
	p := NewPool(Options{Path: path})
	defer p.Close()
	o, err := p.Run(context.Background(), dir, cmds["a"], os.Environ())
	if err != nil || o.Elsewhere != "" || o.Rerun != "" {
		t.Fatalf("%+v %v", o, err)
	}
	if why := p.Changed(); why != "" {
		t.Fatalf("before any change: %q", why)
	}
	os.Remove(path)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if why := p.Changed(); !strings.Contains(why, path+", which a worker runs, was replaced on disk") {
		t.Errorf("after the worker's file was replaced: %q", why)
	}
}
