// Package e2e runs thindist as lld 22 runs it, on generated programs, and
// compares what the linked programs print with in-process ThinLTO and with
// the generator's expected output.
//
// The tests need Debian's clang-22 and lld-22 (/usr/lib/llvm-22/bin, or
// $THINDIST_E2E_LLVM). Without them they are skipped, except when CI=true,
// where a missing toolchain is a failure.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var (
	// thindist is the binary under test, built once by TestMain.
	thindist string
	llvmBin  = testprog.LLVMBin()
	clang    = filepath.Join(llvmBin, "clang")
)

func TestMain(m *testing.M) {
	// Run by lld as the reference DTLTO distributor (shards_test.go)?
	testprog.ServeReferenceDistributor()
	testprog.MainWithThindist(m, "thindist-e2e-", func(exe, tmp string) {
		thindist = exe
		// thindist caches backend results by default (in
		// ~/.cache/thindist): keep these runs out of the user's cache and
		// out of each other's way.
		os.Setenv("THINDIST_CACHE_DIR", filepath.Join(tmp, "cache"))
		// No per-user worker server outside the tests that ask for one
		// (server_test.go, in directories of their own): each link's
		// workers are its own, and no test leaves a process behind.
		os.Setenv("THINDIST_WORKER_IDLE", "0")
		os.Setenv("THINDIST_SERVER_DIR", filepath.Join(tmp, "no-server"))
		// Every link is distributed, however small (the tests' programs
		// are): link_small_test.go tests the links left to lld.
		os.Setenv("THINDIST_IN_PROCESS_BELOW", "0")
	})
}

// needClang skips the test without clang 22, or fails it in CI.
func needClang(t *testing.T) {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang", "clang++", "ld.lld", "llvm-ar")
}

// program generates and compiles a program in a fresh directory.
func program(t *testing.T, o testprog.Options, flags ...string) *testprog.Program {
	t.Helper()
	needClang(t)
	p, err := testprog.Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Compile(context.Background(), clang, flags...); err != nil {
		t.Fatal(err)
	}
	return p
}

func driver(p *testprog.Program) string {
	if p.Options.CXX {
		return clang + "++"
	}
	return clang
}

// linkCmd is a ThinLTO link of objs into out, run in p.Dir. With dist set,
// thindist is the DTLTO distributor and distArgs are passed to it with
// -Xthinlto-distributor; without, ThinLTO runs in process.
type linkCmd struct {
	p        *testprog.Program
	objs     []string
	out      string
	dist     string // distributor; "" for in-process
	distArgs []string
	flags    []string // more driver flags
	env      []string // added to the environment
}

func (l linkCmd) run(t *testing.T) (stderr string, err error) {
	t.Helper()
	args := []string{"-flto=thin", "-fuse-ld=lld", "-O2"}
	if l.dist != "" {
		args = append(args, "-fthinlto-distributor="+l.dist)
		for _, a := range l.distArgs {
			args = append(args, "-Xthinlto-distributor="+a)
		}
	}
	args = append(args, l.flags...)
	args = append(args, l.objs...)
	args = append(args, "-o", l.out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, driver(l.p), args...)
	cmd.Dir = l.p.Dir
	cmd.Env = testEnv(t, l.env...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Stdout = &eb
	err = cmd.Run()
	return eb.String(), err
}

// mustLink links and fails the test if the link fails.
func (l linkCmd) mustLink(t *testing.T) string {
	t.Helper()
	stderr, err := l.run(t)
	if err != nil {
		t.Fatalf("link of %s failed: %v\n%s", l.out, err, stderr)
	}
	return stderr
}

// runProg runs a linked program and returns its standard output.
func runProg(t *testing.T, p *testprog.Program, exe string) string {
	t.Helper()
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(p.Dir, exe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe).Output()
	if err != nil {
		t.Fatalf("running %s: %v", exe, err)
	}
	return string(out)
}

// checkBoth links p through thindist and in process and checks that both
// programs print p.Want. It returns thindist's link's stderr.
func checkBoth(t *testing.T, p *testprog.Program, l linkCmd) string {
	t.Helper()
	l.p = p
	if l.objs == nil {
		l.objs = p.Objects
	}
	inproc := l
	inproc.dist, inproc.distArgs, inproc.out = "", nil, "prog-inprocess"
	inproc.mustLink(t)
	l.dist, l.out = thindist, "prog-dtlto"
	stderr := l.mustLink(t)
	got := runProg(t, p, "prog-dtlto")
	ref := runProg(t, p, "prog-inprocess")
	if got != ref {
		t.Errorf("the DTLTO program prints %q, the in-process one %q", got, ref)
	}
	if got != p.Want {
		t.Errorf("the DTLTO program prints %q, want %q", got, p.Want)
	}
	return stderr
}

// leftovers lists what a run must never leave behind in dir (recursively):
// staging directories and native objects.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var bad []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if strings.HasPrefix(name, ".thindist-") || strings.HasSuffix(name, ".native.o") ||
			strings.Contains(name, ".native.o.thinlto.bc") {
			bad = append(bad, path)
		}
		return nil
	})
	return bad
}

func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	if bad := leftovers(t, dir); len(bad) > 0 {
		t.Errorf("left behind after the run: %q", bad)
	}
}

// fakeCompiler writes a compiler wrapper script into dir. It runs clang 22,
// but its environment can make it misbehave for the one module whose path
// is an argument equal to $TD_TARGET ($TD_MODE: fail, segv, empty), record
// that it ran ($TD_MARKER), its PID ($TD_PIDS), and start and end times
// ($TD_LOG), or sleep first ($TD_SLEEP).
func fakeCompiler(t *testing.T, dir string) string {
	t.Helper()
	script := `#!/bin/sh
out=; prev=; hit=
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  [ -n "$TD_TARGET" ] && [ "$a" = "$TD_TARGET" ] && hit=1
  prev=$a
done
[ -n "$TD_MARKER" ] && echo "$*" >> "$TD_MARKER"
[ -n "$TD_PIDS" ] && echo $$ >> "$TD_PIDS"
[ -n "$TD_LOG" ] && echo "s $(date +%s%N)" >> "$TD_LOG"
if [ -n "$hit" ]; then
  case "$TD_MODE" in
  fail) echo "fake compiler: failing on purpose" >&2; exit 1;;
  segv) kill -SEGV $$;;
  empty) : > "$out"; exit 0;;
  esac
fi
[ -n "$TD_SLEEP" ] && sleep "$TD_SLEEP"
` + clang + ` "$@"; rc=$?
[ -n "$TD_LOG" ] && echo "e $(date +%s%N)" >> "$TD_LOG"
exit $rc
`
	path := filepath.Join(dir, "fake compiler.sh")
	if err := os.WriteFile(path, []byte(script), 0o777); err != nil {
		t.Fatal(err)
	}
	return path
}

// jobFile is the lld 22 job file schema, for tests that write their own.
type jobFile struct {
	Common struct {
		LinkerOutput string   `json:"linker_output"`
		Args         []string `json:"args"`
		Inputs       []string `json:"inputs"`
	} `json:"common"`
	Jobs []job `json:"jobs"`
}

type job struct {
	Args    []string `json:"args"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
}

// thinLinked runs a separate thin link of p (which must have plain names and
// no archives) and returns a job file for its backends in lld 22's schema,
// with compiler as common.args[0]. The shards are <obj>.thinlto.bc and the
// outputs <obj>.native.o.
func thinLinked(t *testing.T, p *testprog.Program, compiler string) *jobFile {
	t.Helper()
	l := linkCmd{p: p, objs: p.Objects, out: "prog-index",
		flags: []string{"-Wl,--thinlto-index-only,--thinlto-emit-imports-files"}}
	l.mustLink(t)
	jf := &jobFile{}
	jf.Common.LinkerOutput = "prog"
	jf.Common.Args = []string{compiler, "-c", "-O2", "-fpic", "-Wno-unused-command-line-argument"}
	jf.Common.Inputs = []string{}
	for _, o := range p.Objects {
		imports, err := os.ReadFile(filepath.Join(p.Dir, o+".imports"))
		if err != nil {
			t.Fatal(err)
		}
		j := job{
			Args:    []string{o, "-fthinlto-index=" + o + ".thinlto.bc", "-o", o + ".native.o"},
			Inputs:  append([]string{o, o + ".thinlto.bc"}, strings.Fields(string(imports))...),
			Outputs: []string{o + ".native.o"},
		}
		jf.Jobs = append(jf.Jobs, j)
	}
	return jf
}

func (jf *jobFile) write(t *testing.T, path string) string {
	t.Helper()
	data, err := json.MarshalIndent(jf, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o666); err != nil {
		t.Fatal(err)
	}
	return path
}

// runThindist runs thindist args in dir with env added, and returns its exit
// code and combined output.
func runThindist(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd, cancel := thindistCommand(t, dir, env, args...)
	defer cancel()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("running thindist: %v", err)
	}
	return 0, string(out)
}

// thindistCommand is thindist args in dir with env added, bounded by a
// generous timeout; cancel releases it.
func thindistCommand(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, thindist, args...)
	cmd.Dir = dir
	cmd.Env = testEnv(t, env...)
	return cmd, cancel
}

// linkNatives links the native objects of a thin-linked program.
func linkNatives(t *testing.T, p *testprog.Program, natives []string, out string) {
	t.Helper()
	cmd := exec.Command(driver(p), append([]string{"-fuse-ld=lld", "-o", out}, natives...)...)
	cmd.Dir = p.Dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("final link: %v\n%s", err, b)
	}
}

// testEnv is the environment for a command of test t: this process's, a
// fresh cache directory of the test's own (so one test's results never
// serve another's compiles and tests that count compiler runs see them all),
// then extra.
func testEnv(t *testing.T, extra ...string) []string {
	// The test server's workers are this machine, with this machine's
	// compiler: the remote tests run it as installed unless they ask for
	// the toolchain as inputs (--remote-toolchain=inputs, which costs each
	// of them its upload, hundreds of MB).
	env := append(os.Environ(), "THINDIST_CACHE_DIR="+t.TempDir(), "THINDIST_REMOTE_TOOLCHAIN=installed")
	return append(env, extra...)
}
