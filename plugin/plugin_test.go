package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport"
)

// The end-to-end tests build libDTLTOthindist.so and testdata/harness.c, a
// stand-in for a linker built with the DTLTO plugin design, and link a small
// program through them with Debian's clang-22 and lld-22.

const llvmBin = "/usr/lib/llvm-22/bin"

var clang = filepath.Join(llvmBin, "clang")

var sources = map[string]string{
	"main.c": `#include <stdio.h>
int add(int, int); int mul(int, int); const char *greet(void);
int main(void) {
  int s = 0;
  for (int i = 0; i < 10; i++) s = add(s, mul(i, i));
  printf("%s %d\n", greet(), s);
  return 0;
}
`,
	"a.c": `static int helper(int x) { return x * 3 + 1; }
int add(int a, int b) { return a + helper(b) - 2 * b - 1 + b; }
`,
	"b.c": `int mul(int a, int b) { return a * b; }
const char *greet(void) { return "hello from thindist"; }
`,
}

var objects = []string{"main.o", "a.o", "b.o"}

var (
	buildOnce sync.Once
	buildErr  error
	pluginSO  string
	harness   string
)

// TestMain removes what tools built, which outlives any one test.
func TestMain(m *testing.M) {
	code := m.Run()
	if pluginSO != "" {
		os.RemoveAll(filepath.Dir(pluginSO))
	}
	os.Exit(code)
}

// slow is what the tests do, all of them in the full tier only.
const slow = "build the plugin (go build -buildmode=c-shared) and link programs with clang/lld 22 through it"

// tools builds the plugin and the harness once for all tests.
func tools(t *testing.T) (string, string) {
	t.Helper()
	testsupport.Slow(t, slow)
	for _, tool := range []string{clang, filepath.Join(llvmBin, "ld.lld")} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("needs LLVM 22 at %s: %v", llvmBin, err)
		}
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		cc = clang
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "thindist-plugin-test-")
		if err != nil {
			buildErr = err
			return
		}
		pluginSO = filepath.Join(dir, "libDTLTOthindist.so")
		harness = filepath.Join(dir, "harness")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", pluginSO, ".").CombinedOutput(); err != nil {
			buildErr = &cmdErr{"go build -buildmode=c-shared", err, out}
			return
		}
		if out, err := exec.Command(cc, "-Wall", "-Wextra", "-Werror", "-I.", "-o", harness, "testdata/harness.c", "-ldl").CombinedOutput(); err != nil {
			buildErr = &cmdErr{cc + " harness.c", err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pluginSO, harness
}

type cmdErr struct {
	what string
	err  error
	out  []byte
}

func (e *cmdErr) Error() string { return e.what + ": " + e.err.Error() + "\n" + string(e.out) }

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustRun(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	out, err := run(t, dir, nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// project compiles the program to ThinLTO bitcode in a fresh directory and
// returns it with the output of the in-process ThinLTO build.
func project(t *testing.T) (dir, want string) {
	t.Helper()
	testsupport.Slow(t, slow)
	dir = t.TempDir()
	for name, src := range sources {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, dir, clang, "-flto=thin", "-O2", "-c", name, "-o", strings.TrimSuffix(name, ".c")+".o")
	}
	if err := os.Mkdir(filepath.Join(dir, "native"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, clang, append([]string{"-flto=thin", "-O2", "-fuse-ld=lld", "-o", "ref"}, objects...)...)
	return dir, mustRun(t, dir, "./ref")
}

// callPlugin runs the harness: thin link, node array, dtltoPerformCodegen.
func callPlugin(t *testing.T, dir string, env []string, extra ...string) (string, int) {
	t.Helper()
	return callPluginOn(t, dir, env, objects, extra...)
}

func callPluginOn(t *testing.T, dir string, env []string, inputs []string, extra ...string) (string, int) {
	t.Helper()
	so, h := tools(t)
	args := []string{"--lld", filepath.Join(llvmBin, "ld.lld"), "--link-arg", "--undefined=main", "--dir", "native"}
	args = append(args, extra...)
	args = append(args, so)
	args = append(args, inputs...)
	cmd := exec.Command(h, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "MAKEFLAGS="), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// The harness prints the diagnostics on stdout; the plugin's summary
	// and anything emitted without callbacks go to stderr.
	out := stdout.String() + "--- stderr:\n" + stderr.String()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code == 2 || code > 3 {
		t.Fatalf("the harness failed (exit %d):\n%s", code, out)
	}
	return out, code
}

func nativeObjects(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "native"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".native.o") {
			objs = append(objs, filepath.Join("native", e.Name()))
		}
	}
	return objs
}

func TestPluginBuildsARunningProgram(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		opts []string
	}{
		{"THINDIST_COMPILER", []string{"THINDIST_COMPILER=" + clang}, []string{"-O2", "--thindist-jobs=2"}},
		{"option", nil, []string{"--thindist-compiler=" + clang, "-O2", "-ffunction-sections", "--thindist-quiet"}},
		{"Argv[0]", nil, []string{clang, "-O2", "-fdata-sections"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, want := project(t)
			var extra []string
			for _, o := range tc.opts {
				extra = append(extra, "--opt", o)
			}
			out, code := callPlugin(t, dir, tc.env, extra...)
			if code != 0 || !strings.Contains(out, "return: 0") || strings.Contains(out, "error:") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			// Largest module first: main.o is the biggest.
			if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, "main.o") {
				t.Errorf("the first node is %q, not main.o", first)
			}
			objs := nativeObjects(t, dir)
			if len(objs) != len(objects) {
				t.Fatalf("native objects %v, want %d", objs, len(objects))
			}
			mustRun(t, dir, clang, append([]string{"-fuse-ld=lld", "-o", "prog"}, objs...)...)
			if got := mustRun(t, dir, "./prog"); got != want {
				t.Errorf("the program printed %q, the in-process ThinLTO build %q", got, want)
			}
			if strings.Contains(tc.name, "option") && strings.Contains(out, "thindist: 3 jobs") {
				t.Errorf("--thindist-quiet did not drop the summary:\n%s", out)
			}
			leftovers, _ := filepath.Glob(filepath.Join(dir, "native", ".thindist-*"))
			if len(leftovers) > 0 {
				t.Errorf("staging left behind: %v", leftovers)
			}
		})
	}
}

// TestPluginArchiveMembers: members of a regular archive are named
// "lib.a(m.o at 98)" in the shards and the imports lists, which is no file;
// the node's ModulePath is. The backend must still be given the shard's name.
func TestPluginArchiveMembers(t *testing.T) {
	dir, want := project(t)
	mustRun(t, dir, filepath.Join(llvmBin, "llvm-ar"), "rcs", "libab.a", "a.o", "b.o")
	if err := os.Mkdir(filepath.Join(dir, "ext"), 0o755); err != nil {
		t.Fatal(err)
	}
	var extra []string
	mustRun(t, dir, filepath.Join(llvmBin, "ld.lld"), "--thinlto-index-only", "--thinlto-emit-imports-files",
		"--undefined=main", "-o", "native/thin.out", "main.o", "libab.a")
	imports, err := os.ReadFile(filepath.Join(dir, "main.o.imports"))
	if err != nil {
		t.Fatal(err)
	}
	// Each imported member, as lld names it, extracted to ext/.
	for _, id := range strings.Split(strings.TrimSpace(string(imports)), "\n") {
		if !strings.Contains(id, " at ") {
			t.Fatalf("main.o imports %q, not an archive member", id)
		}
		member := id[strings.Index(id, "(")+1 : strings.Index(id, " at ")]
		mustRun(t, filepath.Join(dir, "ext"), filepath.Join(llvmBin, "llvm-ar"), "x", "../libab.a", member)
		extra = append(extra, "--member", id+"=ext/"+member)
	}
	if len(extra) != 4 {
		t.Fatalf("main.o.imports = %q, want both members", imports)
	}
	// Without the archive's own copies on disk under their plain names.
	for _, o := range []string{"a.o", "b.o"} {
		os.Remove(filepath.Join(dir, o))
	}
	extra = append(extra, "--no-thin-link", "--opt", "-O2")
	cache := t.TempDir()
	out, code := callPluginOn(t, dir, []string{"THINDIST_COMPILER=" + clang, "THINDIST_CACHE_DIR=" + cache}, []string{"main.o", "libab.a"}, extra...)
	if code != 0 || strings.Contains(out, "error:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The record names the members as a user knows them.
	run, err := record.Open(cache).Load("last")
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, a := range run.Actions {
		mods = append(mods, a.Module)
	}
	slices.Sort(mods)
	if want := []string{"libab.a(a.o)", "libab.a(b.o)", "main.o"}; !slices.Equal(mods, want) {
		t.Errorf("the record's modules are %q, want %q", mods, want)
	}
	objs := nativeObjects(t, dir)
	if len(objs) != 3 {
		t.Fatalf("native objects %v, want 3", objs)
	}
	mustRun(t, dir, clang, append([]string{"-fuse-ld=lld", "-o", "prog"}, objs...)...)
	if got := mustRun(t, dir, "./prog"); got != want {
		t.Errorf("the program printed %q, the in-process ThinLTO build %q", got, want)
	}
}

// failure checks a run that must fail: non-zero return, an error emitted
// through the callback that names module, and no object left behind.
func failure(t *testing.T, out string, code int, module string, wants ...string) {
	t.Helper()
	t.Logf("harness output:\n%s", out)
	if code != 1 || !strings.Contains(out, "return: 1") {
		t.Fatalf("exit %d, want a non-zero return:\n%s", code, out)
	}
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "error: ") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		t.Fatalf("no error emitted through EmitError:\n%s", out)
	}
	all := strings.Split(out, "\nreturn:")[0]
	if !strings.Contains(errs[0], module) {
		t.Errorf("the first error does not name %s:\n%s", module, out)
	}
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("the errors do not say %q:\n%s", w, out)
		}
	}
}

func noObjects(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, "native"))
	for _, e := range ents {
		if e.Name() != "thin.out" {
			t.Errorf("left behind after a failure: native/%s", e.Name())
		}
	}
}

func TestPluginMissingImport(t *testing.T) {
	dir, _ := project(t)
	// The thin link first, then the imported module disappears.
	mustRun(t, dir, filepath.Join(llvmBin, "ld.lld"), append([]string{"--thinlto-index-only",
		"--thinlto-emit-imports-files", "--undefined=main", "-o", "native/thin.out"}, objects...)...)
	imports, err := os.ReadFile(filepath.Join(dir, "main.o.imports"))
	if err != nil || !strings.Contains(string(imports), "a.o") {
		t.Fatalf("main.o.imports = %q, %v; want it to import a.o", imports, err)
	}
	if err := os.Remove(filepath.Join(dir, "a.o")); err != nil {
		t.Fatal(err)
	}
	out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + clang}, "--no-thin-link", "--opt", "-O2")
	failure(t, out, code, "main.o", `main.o: imported module "a.o" does not exist`)
	noObjects(t, dir)
}

func fakeCompiler(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-clang")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeOut is shell that finds the argument of -o.
const findOut = `out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
`

func TestPluginCompilerFails(t *testing.T) {
	dir, _ := project(t)
	fake := fakeCompiler(t, findOut+`echo "fake-clang: fatal error: cannot compile $out" >&2; printf 'partial' > "$out"; exit 1
`)
	out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + fake, "THINDIST_JOBS=1"})
	// With one job the largest module, main.o, runs and fails first.
	failure(t, out, code, "main.o", "backend compilation of main.o failed: exit status 1", "fake-clang: fatal error")
	noObjects(t, dir)
}

func TestPluginEmptyOutput(t *testing.T) {
	for name, script := range map[string]string{
		"empty":   findOut + `: > "$out"; exit 0` + "\n",
		"missing": "exit 0\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := project(t)
			out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + fakeCompiler(t, script), "THINDIST_JOBS=1"})
			want := map[string]string{"empty": "wrote an empty object file", "missing": "wrote no object file"}[name]
			failure(t, out, code, "main.o", "backend compilation of main.o failed", want)
			noObjects(t, dir)
		})
	}
}

func TestPluginBadOption(t *testing.T) {
	dir, _ := project(t)
	out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + clang}, "--opt", "--thindist-jobs=zero")
	failure(t, out, code, "--thindist-jobs=zero", `--jobs: bad value "zero" (want a number of at least 1)`)
	noObjects(t, dir)
}

// TestPluginMalformedCalls: what the linker should never pass comes back as
// a non-zero return with an error, not as a crash.
func TestPluginMalformedCalls(t *testing.T) {
	dir, _ := project(t)
	for mode, want := range map[string]string{
		"null-cfg":       "NULL configuration",
		"null-nodes":     "BitcodeNodes is NULL",
		"null-node":      "BitcodeNodes[0] is NULL",
		"null-argv":      "Argv is NULL",
		"null-argv-elem": "Argv[0] is NULL",
		"null-module-id": "ModuleId is NULL",
		"null-imports":   "ImportsList is NULL",
		"garbage-nodes":  "internal error (panic)",
	} {
		t.Run(mode, func(t *testing.T) {
			out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + clang}, "--mode", mode)
			if code != 1 || !strings.Contains(out, "return: 1") || !strings.Contains(out, want) {
				t.Errorf("exit %d, want a non-zero return saying %q:\n%s", code, want, out)
			}
			noObjects(t, dir)
		})
	}
}

func TestPluginNoCallbacks(t *testing.T) {
	dir, _ := project(t)
	fake := fakeCompiler(t, "echo boom >&2; exit 3\n")
	out, code := callPlugin(t, dir, []string{"THINDIST_COMPILER=" + fake}, "--mode", "no-callbacks")
	if code != 1 || !strings.Contains(out, "error: thindist: backend compilation of") {
		t.Errorf("exit %d, want the error on stderr:\n%s", code, out)
	}
}

// TestPluginKeepsARecord: a link through the plugin leaves a record in the
// cache directory as the other entry points do: the linker's command line
// and output, every module, the phases, and the errors in its log.
func TestPluginKeepsARecord(t *testing.T) {
	dir, _ := project(t)
	cache := t.TempDir()
	env := []string{"THINDIST_COMPILER=" + clang, "THINDIST_CACHE_DIR=" + cache}
	out, code := callPlugin(t, dir, env, "--output", "app", "--opt", "-O2")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	run, err := record.Open(cache).Load("last")
	if err != nil {
		t.Fatalf("no record of the run: %v\n%s", err, out)
	}
	if run.Entry != "plugin" || run.Output != "app" || run.Dir != dir || run.Error != "" {
		t.Errorf("entry %q, output %q, dir %q, error %q; want plugin, app, %s and none", run.Entry, run.Output, run.Dir, run.Error, dir)
	}
	if len(run.Args) == 0 || filepath.Base(run.Args[0]) != "harness" || !slices.Contains(run.Args, "--output") {
		t.Errorf("the command line is %q, not the linker's (the harness's)", run.Args)
	}
	var mods []string
	for _, a := range run.Actions {
		mods = append(mods, a.Module)
		if a.Where != record.WhereLocal || a.Key == "" || a.End <= a.Begin {
			t.Errorf("%s: where %q, key %q, start %d, end %d", a.Module, a.Where, a.Key, a.Begin, a.End)
		}
	}
	slices.Sort(mods)
	if want := []string{"a.o", "b.o", "main.o"}; !slices.Equal(mods, want) {
		t.Errorf("the record's modules are %q, want %q", mods, want)
	}
	var phases []string
	for _, p := range run.Phases {
		phases = append(phases, p.Name)
	}
	if !slices.Equal(phases, []string{"lld", "backends"}) {
		t.Errorf("phases %q, want the linker's work before the plugin, then the backends", phases)
	}
	if !strings.Contains(run.Log, "thindist: app: 3 jobs") {
		t.Errorf("the record's log lacks the summary naming app:\n%s", run.Log)
	}

	// A failed compile is recorded with the linker's diagnostic in the log.
	bad := fakeCompiler(t, "echo 'clang: error: injected' >&2; exit 1")
	out, code = callPlugin(t, dir, []string{"THINDIST_COMPILER=" + bad, "THINDIST_CACHE_DIR=" + cache}, "--output", "app")
	if code == 0 {
		t.Fatalf("a failing compiler: exit 0\n%s", out)
	}
	run, err = record.Open(cache).Load("last")
	if err != nil {
		t.Fatal(err)
	}
	if run.Error == "" || !strings.Contains(run.Log, "thindist: error:") || !strings.Contains(run.Log, "injected") {
		t.Errorf("the failed run's record: error %q, log:\n%s", run.Error, run.Log)
	}
}
