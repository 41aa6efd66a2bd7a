package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestWorkerLinkByteIdentical: `thindist link` with a worker writes the
// native objects and the output it writes without one, for plain, -r,
// -shared, PIE and static links, -mllvm options, a sample profile and
// per-module options (--compdb), and the record says the worker compiled
// every module.
func TestWorkerLinkByteIdentical(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 6, CXX: true, ArchiveModules: 2, Seed: 3}, "-fPIC")
	prof, err := p.WriteSampleProfile("prof.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Per-module options: the odd modules were compiled at -O1 -g.
	var db []map[string]any
	for i, m := range p.Modules {
		args := []string{clang + "++", "-flto=thin", "-O2", "-fPIC", "-c", m.Source, "-o", m.Object}
		if i%2 == 1 {
			args = append(args, "-O1", "-g")
		}
		db = append(db, map[string]any{"directory": p.Dir, "file": m.Source, "arguments": args, "output": m.Object})
	}
	data, _ := json.Marshal(db)
	if err := os.WriteFile(filepath.Join(p.Dir, "compile_commands.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		thindist []string
		link     []string
	}{
		{"plain", nil, nil},
		{"r", nil, []string{"-r", "-nostdlib"}},
		{"shared", nil, []string{"-shared"}},
		{"pie", nil, []string{"-pie"}},
		{"static", nil, []string{"-static"}},
		{"mllvm", nil, []string{"-Wl,-mllvm,-align-all-functions=6"}},
		{"profile", nil, []string{"-fprofile-sample-use=" + prof}},
		{"compdb", []string{"--compdb=compile_commands.json"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var objs [2]map[string][]byte
			for i, flag := range []string{"--no-worker", "--worker=" + w} {
				keep := filepath.Join(t.TempDir(), "natives")
				out := "prog-" + c.name + []string{"-exec", "-worker"}[i]
				args := append([]string{"link", "--jobs=1", flag, "--keep-native-objects=" + keep}, c.thindist...)
				args = append(append(append(args, "--", clang+"++", "-flto=thin", "-fuse-ld=lld", "-O2"), c.link...), p.Objects...)
				args = append(args, "-o", out)
				cache := t.TempDir()
				if code, msg := runThindist(t, p.Dir, []string{"THINDIST_CACHE_DIR=" + cache}, args...); code != 0 {
					t.Fatalf("thindist %s: exit %d\n%s", strings.Join(args, " "), code, msg)
				}
				objs[i] = testprog.ReadTree(t, keep)
				objs[i]["OUTPUT"], _ = os.ReadFile(filepath.Join(p.Dir, out))
				run := lastRecord(t, p.Dir, cache)
				for _, a := range run.Actions {
					if a.Worker != (i == 1) {
						t.Errorf("%s: %s on a worker: %v (why not: %q)", flag, a.Module, a.Worker, a.NotWorker)
					}
				}
			}
			if len(objs[0]) < len(p.Modules)+1 || len(objs[0]) != len(objs[1]) {
				t.Fatalf("%d native objects without the worker, %d with", len(objs[0]), len(objs[1]))
			}
			for name, b := range objs[0] {
				if !bytes.Equal(b, objs[1][name]) {
					t.Errorf("%s differs with the worker (%d bytes, %d without)", name, len(objs[1][name]), len(b))
				}
			}
		})
	}
}

// TestWorkerNotForClang19: a link with Debian's clang 19 compiles its
// backends without the clang 22 worker, and `thindist report` says why.
func TestWorkerNotForClang19(t *testing.T) {
	w := testprog.Worker(t)
	bin19 := "/usr/lib/llvm-19/bin"
	testprog.NeedLLVM(t, bin19, "clang", "ld.lld")
	p, err := testprog.Generate(t.TempDir(), testprog.Options{Modules: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Compile(context.Background(), filepath.Join(bin19, "clang")); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	env := []string{"THINDIST_CACHE_DIR=" + cache}
	args := append([]string{"link", "--jobs=1", "--worker=" + w, "--", filepath.Join(bin19, "clang"), "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
	if code, msg := runThindist(t, p.Dir, env, append(args, "-o", "prog")...); code != 0 {
		t.Fatalf("thindist link: exit %d\n%s", code, msg)
	}
	if got := runProg(t, p, "prog"); got != p.Want {
		t.Errorf("the program prints %q, want %q", got, p.Want)
	}
	code, report := runThindistStdout(t, p.Dir, env, "report")
	want := `no worker: ` + filepath.Join(bin19, "clang") + ` is "Debian clang version 19`
	if code != 0 || !strings.Contains(report, want) || strings.Contains(report, "on a worker") {
		t.Errorf("thindist report (exit %d) lacks %q:\n%s", code, want, report)
	}
}

// TestWorkerKilledMidJob: a DTLTO link whose every worker is killed once it
// has taken its job still links a correct program: each job is rerun by
// exec, and the record says why.
func TestWorkerKilledMidJob(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 4, Seed: 11})
	// The real worker answers the compiler check; --serve reads a little
	// of its first job and is killed.
	dying := filepath.Join(t.TempDir(), "dying-worker")
	script := "#!/bin/sh\n[ \"$1\" = --serve ] || exec " + w + " \"$@\"\nhead -c 4 >/dev/null\nkill -9 $$\n"
	if err := os.WriteFile(dying, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + dying}, env: []string{"THINDIST_CACHE_DIR=" + cache}})
	run := lastRecord(t, p.Dir, cache)
	for _, a := range run.Actions {
		if a.Worker || a.NotWorker != "the worker ended mid-job (signal: killed); rerun by exec" {
			t.Errorf("%s: worker %v, why not %q; want a rerun by exec", a.Module, a.Worker, a.NotWorker)
		}
	}
	if len(run.Actions) != len(p.Modules) {
		t.Errorf("%d actions recorded, want %d", len(run.Actions), len(p.Modules))
	}
}
