package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// These tests run thindist as build systems run it under `make -jN`: in
// recipes make does not share its jobserver with (no '+': CMake's link
// rules, Kbuild's), which get --jobserver-auth=R,W in MAKEFLAGS with R and
// W closed, and with make 4.4's named FIFO.

// needTool skips the test without the tool, or fails it in CI.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing", name)
		}
		t.Skipf("no %s", name)
	}
}

// runMake runs make -j2 in dir and returns its combined output.
func runMake(t *testing.T, dir string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-j2")
	cmd.Dir = dir
	cmd.Env = testEnv(t, append([]string{"MAKEFLAGS="}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -j2: %v\n%s", err, out)
	}
	return string(out)
}

const notShared = "make's jobserver is not available to this recipe (mark it with '+' to share make's job slots)"

// checkNotShared checks that thindist told once in the make invocation
// that it could not use make's jobserver, and fell back to --jobs.
func checkNotShared(t *testing.T, out string) {
	t.Helper()
	if n := strings.Count(out, notShared); n != 1 {
		t.Errorf("thindist warned %d times that make's jobserver is not available, want once:\n%s", n, out)
	}
	if strings.Contains(out, "reading a token") {
		t.Errorf("thindist read something that is not make's jobserver:\n%s", out)
	}
	// make closed the descriptors: they are said to be not passed, not
	// named by what the Go runtime opened at their numbers meanwhile.
	if !strings.Contains(out, " not passed to this process") || strings.Contains(out, "/sys/fs/cgroup") {
		t.Errorf("the warning does not say make's descriptors were not passed:\n%s", out)
	}
}

// TestCMakeMakeJobs builds a CMake project (Unix Makefiles generator) with
// the README's recipe under `make -j2`, thindist as lld's distributor.
// CMake's link rule has no '+': before thindist checked the descriptors,
// it took the Go runtime's cgroup files at 3 and 4 for make's jobserver and
// failed the link with "reading a token from make's jobserver: EOF".
func TestCMakeMakeJobs(t *testing.T) {
	t.Parallel()
	needClang(t)
	needTool(t, "make")
	needTool(t, "cmake")
	src := t.TempDir()
	p, err := testprog.Generate(src, testprog.Options{Modules: 12, Seed: 41})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, m := range p.Modules {
		sources = append(sources, m.Source)
	}
	lists := fmt.Sprintf(`cmake_minimum_required(VERSION 3.20)
project(prog C)
set(CMAKE_INTERPROCEDURAL_OPTIMIZATION ON)
add_compile_options(-flto=thin)
add_link_options(-flto=thin -fuse-ld=lld -fthinlto-distributor=%s)
add_executable(prog %s)
`, thindist, strings.Join(sources, " "))
	if err := os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte(lists), 0o666); err != nil {
		t.Fatal(err)
	}
	build := t.TempDir()
	cmd := exec.Command("cmake", "-G", "Unix Makefiles", "-S", src, "-B", build, "-DCMAKE_C_COMPILER="+clang)
	cmd.Env = testEnv(t, "MAKEFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cmake: %v\n%s", err, out)
	}
	out := runMake(t, build)
	checkNotShared(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := exec.CommandContext(ctx, filepath.Join(build, "prog")).Output()
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	if string(got) != p.Want {
		t.Errorf("the program prints %q, want %q", got, p.Want)
	}
}

// TestMakeWithoutPlus links under `make -j2` from a recipe without '+':
// thindist must not take the descriptors MAKEFLAGS names (closed by make,
// reused by the Go runtime) for a jobserver, and runs with --jobs instead.
func TestMakeWithoutPlus(t *testing.T) {
	t.Parallel()
	needTool(t, "make")
	const modules = 10
	p := program(t, testprog.Options{Modules: modules, Seed: 43})
	fake := fakeCompiler(t, t.TempDir())
	log := filepath.Join(t.TempDir(), "log")
	args := []string{driver(p), "-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + thindist,
		"-Xthinlto-distributor=--jobs=3", "-Wl,--thinlto-remote-compiler=" + fake}
	args = append(args, p.Objects...)
	dir := t.TempDir()
	makefile := fmt.Sprintf("all:\n\tcd %s && %s -o prog-make\n", action.ShellQuote([]string{p.Dir}), action.ShellQuote(args))
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o666); err != nil {
		t.Fatal(err)
	}
	out := runMake(t, dir, "TD_LOG="+log, "TD_SLEEP=0.2")
	checkNotShared(t, out)
	if !strings.Contains(out, "using --jobs=3") {
		t.Errorf("the warning does not say the run uses --jobs=3:\n%s", out)
	}
	checkBoundedLink(t, p, "prog-make", log, modules, 3, "with --jobs=3")
}

// TestJobserverWarningOncePerBuild: three links from recipes without '+'
// in one `make -j2` (as a CMake project with several programs has) warn
// once that make's jobserver is not available, saying how to silence it;
// the next make warns once again; --no-jobserver-warning (here its
// variable) silences it, and every link still runs.
func TestJobserverWarningOncePerBuild(t *testing.T) {
	t.Parallel()
	p, dir := threeLinks(t)
	for i := 0; i < 2; i++ {
		out := runMake(t, dir)
		checkNotShared(t, out)
		if !strings.Contains(out, "--no-jobserver-warning") {
			t.Errorf("the warning does not say how to silence it:\n%s", out)
		}
		if n := strings.Count(out, "thindist: prog-"); n != 3 {
			t.Errorf("make %d: %d summary lines, want one for each of the 3 links:\n%s", i+1, n, out)
		}
	}
	out := runMake(t, dir, "THINDIST_NO_JOBSERVER_WARNING=1")
	if strings.Contains(out, "jobserver") || strings.Count(out, "thindist: prog-") != 3 {
		t.Errorf("with THINDIST_NO_JOBSERVER_WARNING=1, want 3 links and no warning:\n%s", out)
	}
	checkThreeLinks(t, p)
}

// threeLinks writes a Makefile whose three recipes without '+' link p's
// objects into prog-1, prog-2 and prog-3 with thindist as the distributor,
// and returns p and the Makefile's directory.
func threeLinks(t *testing.T) (*testprog.Program, string) {
	t.Helper()
	needTool(t, "make")
	p := program(t, testprog.Options{Modules: 3, Seed: 53})
	fake := fakeCompiler(t, t.TempDir())
	args := []string{driver(p), "-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + thindist,
		"-Wl,--thinlto-remote-compiler=" + fake}
	args = append(args, p.Objects...)
	dir := t.TempDir()
	link := "\tcd " + action.ShellQuote([]string{p.Dir}) + " && " + action.ShellQuote(args) + " -o $@\n"
	makefile := "all: prog-1 prog-2 prog-3\n.PHONY: prog-1 prog-2 prog-3\n" +
		"prog-1:\n" + link + "prog-2:\n" + link + "prog-3:\n" + link
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o666); err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// checkThreeLinks checks the programs threeLinks' Makefile linked.
func checkThreeLinks(t *testing.T, p *testprog.Program) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		if got := runProg(t, p, fmt.Sprintf("prog-%d", i)); got != p.Want {
			t.Errorf("prog-%d prints %q, want %q", i, got, p.Want)
		}
	}
}

// TestConfigTypoOncePerBuild: a typo in the config file every link reads
// does not fail the links of a make; the first says so, naming the file,
// the line and the setting meant, the others do not.
func TestConfigTypoOncePerBuild(t *testing.T) {
	t.Parallel()
	p, dir := threeLinks(t)
	xdg := t.TempDir()
	file := filepath.Join(xdg, "thindist", "config")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("# mine\ncache-sise = 1G\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runMake(t, dir, "XDG_CONFIG_HOME="+xdg, "THINDIST_NO_JOBSERVER_WARNING=1")
	want := file + `:2: unknown setting "cache-sise" (did you mean cache-size?)`
	if n := strings.Count(out, want); n != 1 || strings.Count(out, "thindist: prog-") != 3 {
		t.Errorf("warned %d times of %s, want once and 3 links:\n%s", n, want, out)
	}
	checkThreeLinks(t, p)
}

// checkBoundedLink checks a link of p's modules into binary out: every
// module compiled once (as the fake compiler logged), at most limit
// compilers at once (why says where the limit came from), and a program
// that prints the right thing. It returns the most compilers seen at once.
func checkBoundedLink(t *testing.T, p *testprog.Program, out, log string, modules, limit int, why string) int {
	t.Helper()
	max, runs := maxConcurrent(t, log)
	if runs != modules {
		t.Errorf("%d compiles, want %d", runs, modules)
	}
	if max > limit {
		t.Errorf("%s, %d compilers ran at once", why, max)
	}
	if got := runProg(t, p, out); got != p.Want {
		t.Errorf("prints %q, want %q", got, p.Want)
	}
	return max
}

// TestJobserverFifo emulates make 4.4's jobserver (Debian's make 4.3 has
// none): a named FIFO holding one token, named in MAKEFLAGS as
// --jobserver-auth=fifo:PATH. With --jobs=8, thindist must run at most 2
// compilers at once (the token and its implicit slot) and give the token
// back.
func TestJobserverFifo(t *testing.T) {
	t.Parallel()
	const modules = 8
	p := program(t, testprog.Options{Modules: modules, Seed: 47})
	fifo := filepath.Join(t.TempDir(), "jobserver")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// make's end: it holds the FIFO open and put the tokens in.
	mk, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mk.Close()
	if _, err := mk.Write([]byte("+")); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	l := linkCmd{p: p, objs: p.Objects, out: "prog-fifo", dist: thindist,
		distArgs: []string{"--jobs=8"},
		flags:    []string{"-Wl,--thinlto-remote-compiler=" + fakeCompiler(t, t.TempDir())},
		env:      []string{"MAKEFLAGS=-j2 --jobserver-auth=fifo:" + fifo, "TD_LOG=" + log, "TD_SLEEP=0.2"}}
	out := l.mustLink(t)
	if strings.Contains(out, "jobserver") {
		t.Errorf("thindist did not use the FIFO jobserver:\n%s", out)
	}
	if max := checkBoundedLink(t, p, "prog-fifo", log, modules, 2, "with one token in make's FIFO"); max < 2 {
		t.Errorf("the token in make's FIFO was never used: at most %d compiler at once", max)
	}
	// The token is back, and only it.
	mk.SetReadDeadline(time.Now().Add(time.Second))
	var b [4]byte
	if n, err := mk.Read(b[:]); n != 1 || b[0] != '+' {
		t.Errorf("read %q from make's FIFO after the link (%v), want the one token '+'", b[:n], err)
	}
}
