package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestBackendFailures makes one backend misbehave through a fake compiler
// that lld is told to use (-Wl,--thinlto-remote-compiler= comes after
// clang's own and wins): the link must fail, thindist must name the module
// and say what happened, and nothing may be left behind.
func TestBackendFailures(t *testing.T) {
	t.Parallel()
	p := program(t, testprog.Options{Modules: 8, Seed: 11, ArchiveModules: 2})
	fake := fakeCompiler(t, t.TempDir())
	const target = "m3.o"
	for _, tc := range []struct {
		mode string
		want string // in thindist's message
	}{
		{"fail", "exit"},
		{"segv", "segmentation fault"},
		{"empty", "empty object"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			out := "prog-" + tc.mode
			l := linkCmd{p: p, objs: p.Objects, out: out, dist: thindist,
				distArgs: []string{"--jobs=2"},
				flags:    []string{"-Wl,--thinlto-remote-compiler=" + fake},
				env:      []string{"TD_TARGET=" + target, "TD_MODE=" + tc.mode}}
			stderr, err := l.run(t)
			if err == nil {
				t.Fatalf("the link succeeded although the backend of %s misbehaved (%s):\n%s", target, tc.mode, stderr)
			}
			if !strings.Contains(stderr, "backend compilation of "+target+" failed") {
				t.Errorf("thindist does not name %s as failed:\n%s", target, stderr)
			}
			if !strings.Contains(strings.ToLower(stderr), tc.want) {
				t.Errorf("thindist does not say %q:\n%s", tc.want, stderr)
			}
			if !strings.Contains(stderr, "distributor execution failed") {
				t.Errorf("lld did not see the distributor fail:\n%s", stderr)
			}
			t.Logf("%s", stderr)
			if _, err := os.Stat(filepath.Join(p.Dir, out)); err == nil {
				t.Errorf("%s was written although the link failed", out)
			}
			noLeftovers(t, p.Dir)
		})
	}
}

// TestMissingImport removes a module that another imports after the thin
// link. With the import declared in the job's inputs, thindist must refuse
// to run anything; with an older-style job that does not declare it, clang's
// backend fails silently ("Error running ThinLTO backend", exit 0, empty
// object) and thindist must catch that.
func TestMissingImport(t *testing.T) {
	t.Parallel()
	p := program(t, testprog.Options{Modules: 6, Seed: 13})
	fake := fakeCompiler(t, t.TempDir())
	jf := thinLinked(t, p, fake)
	// main.o imports from every helper: find one of its imports.
	var mainJob *job
	for i := range jf.Jobs {
		if jf.Jobs[i].Inputs[0] == "main.o" {
			mainJob = &jf.Jobs[i]
		}
	}
	if mainJob == nil || len(mainJob.Inputs) < 3 {
		t.Fatalf("main.o imports nothing: %+v", mainJob)
	}
	gone := mainJob.Inputs[2]
	if err := os.Rename(filepath.Join(p.Dir, gone), filepath.Join(p.Dir, gone+".away")); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")

	t.Run("declared", func(t *testing.T) {
		path := jf.write(t, filepath.Join(p.Dir, "declared.json"))
		code, out := runThindist(t, p.Dir, []string{"TD_MARKER=" + marker}, path)
		if code == 0 {
			t.Fatalf("thindist succeeded with %s missing:\n%s", gone, out)
		}
		if !strings.Contains(out, "main.o") || !strings.Contains(out, gone) {
			t.Errorf("the message does not name main.o and the missing %s:\n%s", gone, out)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("a compiler ran although an input was missing")
		}
		noLeftovers(t, p.Dir)
	})
	t.Run("undeclared", func(t *testing.T) {
		only := *jf
		only.Jobs = []job{*mainJob}
		only.Jobs[0].Inputs = only.Jobs[0].Inputs[:2]
		path := only.write(t, filepath.Join(p.Dir, "undeclared.json"))
		code, out := runThindist(t, p.Dir, nil, path)
		if code == 0 {
			t.Fatalf("thindist succeeded with the import %s missing:\n%s", gone, out)
		}
		if !strings.Contains(out, "backend compilation of main.o failed") || !strings.Contains(out, "Error running ThinLTO backend") {
			t.Errorf("the message does not name main.o and clang's backend error:\n%s", out)
		}
		noLeftovers(t, p.Dir)
	})
}

// TestMalformedJobFiles: every kind of broken job file is a usage error (exit
// 2) that names what is wrong, and nothing runs.
func TestMalformedJobFiles(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir := t.TempDir()
	fake := fakeCompiler(t, dir)
	for _, f := range []string{"a.o", "a.o.thinlto.bc"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	fq := `"` + fake + `"`
	good := `"args": ["a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "a.native.o"], "inputs": ["a.o", "a.o.thinlto.bc"], "outputs": ["a.native.o"]`
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"bad JSON", `{"common": {"args": [` + fq + `]}, "jobs": [{` + good + `}`, []string{"malformed JSON"}},
		{"not JSON", "", []string{"malformed JSON"}},
		{"wrong type", `{"common": {"args": [` + fq + `]}, "jobs": [{"args": [], "inputs": "a.o", "outputs": ["a.native.o"]}]}`,
			[]string{"job 0", "jobs[0].inputs", "array"}},
		{"wrong type of args", `{"common": {"args": ` + fq + `}, "jobs": [{` + good + `}]}`, []string{"common.args"}},
		{"missing index shard", `{"common": {"args": [` + fq + `]}, "jobs": [{"args": ["a.o", "-o", "a.native.o"], "inputs": ["a.o"], "outputs": ["a.native.o"]}]}`,
			[]string{"job 0", "jobs[0].inputs", "index shard"}},
		{"missing outputs", `{"common": {"args": [` + fq + `]}, "jobs": [{"args": ["a.o"], "inputs": ["a.o", "a.o.thinlto.bc"], "outputs": []}]}`,
			[]string{"job 0", "jobs[0].outputs"}},
		{"missing jobs", `{"common": {"args": [` + fq + `]}}`, []string{"jobs"}},
		{"empty compiler", `{"common": {"args": ["", "-c"]}, "jobs": [{` + good + `}]}`,
			[]string{"common.args[0]", "--thinlto-remote-compiler"}},
		{"unsupported RFC version", `{"version": {"major": 1, "minor": 0}, "common": {"codegen-tool": ` + fq + `, "args": []}, "jobs": []}`,
			[]string{"version", "1.0", "not supported"}},
		{"RFC template out of range", `{"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": ` + fq + `, "args": ["-c"]},
			"jobs": [{"args": ["a.o", ["-fthinlto-index=", "inputs", 5], "-o", ["", "outputs", 0]], "inputs": ["a.o", "a.o.thinlto.bc"], "outputs": ["a.native.o"]}]}`,
			[]string{"job 0", "inputs[5]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tc.content), 0o666); err != nil {
				t.Fatal(err)
			}
			code, out := runThindist(t, dir, []string{"TD_MARKER=" + marker}, path)
			if code != 2 {
				t.Errorf("exit status %d, want 2:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the message does not mention %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a compiler ran for a malformed job file")
			}
			noLeftovers(t, dir)
		})
	}
}
