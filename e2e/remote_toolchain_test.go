package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// toolchainLine is the remote summary's figure of the shipped toolchain.
var toolchainLine = regexp.MustCompile(`toolchain shipped, (\d+) files, [0-9.]+ MiB(?:, ([0-9.]+) MiB uploaded in \S+| already in the CAS)`)

// shippedLink links p with every backend on the test server at addr, the
// compiler shipped as inputs, and returns the summary's toolchain figures:
// the files shipped (-1 when nothing was: no action executed) and the MiB
// uploaded for them. Its record goes to the cache directory cache.
func shippedLink(t *testing.T, p *testprog.Program, addr, cache string, flags ...string) (files int, uploadedMiB float64, stderr string) {
	t.Helper()
	l := linkCmd{p: p, objs: p.Objects, out: "prog-dtlto", dist: thindist, flags: flags, env: []string{"THINDIST_CACHE_DIR=" + cache},
		distArgs: []string{"--no-cache", "--remote=grpc://" + addr, remoteOnly, "--remote-fallback=none", "--no-race",
			"--remote-toolchain=inputs"}}
	stderr = l.mustLink(t)
	m := toolchainLine.FindStringSubmatch(stderr)
	if m == nil {
		return -1, 0, stderr
	}
	files, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		uploadedMiB, _ = strconv.ParseFloat(m[2], 64)
	}
	return files, uploadedMiB, stderr
}

// localLink links p with thindist here, no remote service: the reference
// the remote links must match byte for byte.
func localLink(t *testing.T, p *testprog.Program, flags ...string) []byte {
	t.Helper()
	linkCmd{p: p, objs: p.Objects, out: "prog-local", dist: thindist, flags: flags, distArgs: []string{"--no-cache"}}.mustLink(t)
	b, err := os.ReadFile(filepath.Join(p.Dir, "prog-local"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameProgram(t *testing.T, p *testprog.Program, want []byte, what string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(p.Dir, "prog-dtlto"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the program differs from the one linked here", what)
	}
	if out := runProg(t, p, "prog-dtlto"); out != p.Want {
		t.Errorf("%s: the program prints %q, want %q", what, out, p.Want)
	}
}

// TestRemoteToolchainInputs: with the compiler shipped as inputs, every
// backend runs on a worker that sees nothing but its input root (chrooted
// into it: no clang, no libc, no loader, no /proc, no /dev), and the
// program is byte for byte the one linked here. A second link, of another
// program, finds the toolchain in the CAS and uploads none of it; a
// compiler whose tree differs by one library's byte is a new toolchain:
// its actions miss the caches, only that library goes up, and the program
// is the same.
func TestRemoteToolchainInputs(t *testing.T) {
	testsupport.Slow(t, "uploads and runs a 265 MB toolchain in a chroot (about 30 s)")
	if why := reapitest.ChrootSupported(); why != "" {
		t.Skip(why)
	}
	p := remoteProgram(t)
	// Each command starts as `/usr/bin/env -- ARGV` inside the root, as
	// on Buildbarn's chrooting runner.
	srv, addr := fakeRemote(t, reapitest.Options{Chroot: true, ChrootEnv: true, Zstd: true})
	tree, err := toolchain.NewDigests(nil).Tree(clang)
	if err != nil {
		t.Fatal(err)
	}
	shippedUploads := func(from int) (n int) {
		for _, u := range srv.Uploads()[from:] {
			for d := range tree.Files {
				if d.HexHash() == u.Hash {
					n++
				}
			}
		}
		return n
	}

	want := localLink(t, p)
	cache := t.TempDir()
	files, up, stderr := shippedLink(t, p, addr, cache)
	sameProgram(t, p, want, "shipped toolchain")
	if sum := parseRemote(t, stderr); sum.executed != len(p.Modules) || sum.local != 0 {
		t.Errorf("cold link: summary %+v, want all %d actions executed remotely\n%s", sum, len(p.Modules), stderr)
	}
	if files != tree.Count || up*(1<<20) < float64(tree.Bytes)*0.99 || shippedUploads(0) != tree.Count {
		t.Errorf("cold link: %d files, %.2f MiB uploaded, %d of the tree's files in the server's uploads; want the tree's %d files, %d bytes, each once\n%s",
			files, up, shippedUploads(0), tree.Count, tree.Bytes, stderr)
	}
	t.Logf("cold: %s", firstMatch(stderr))
	code, report := runThindistStdout(t, p.Dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report")
	if code != 0 || !regexp.MustCompile(`compiler shipped as inputs, `+strconv.Itoa(tree.Count)+` files, [0-9.]+ MiB, [0-9.]+ MiB uploaded in `).MatchString(report) {
		t.Errorf("thindist report (exit %d) does not say the toolchain was uploaded:\n%s", code, report)
	}

	// Another program: executed, with the toolchain already there.
	q := program(t, testprog.Options{Modules: 4, Seed: 11})
	wantQ := localLink(t, q)
	before := len(srv.Uploads())
	execs := srv.Stats().Executions
	// With grouping asked for, which the shipped compiler's workers
	// cannot run (a group's command is a shell script): refused, with a
	// note, and every action runs alone.
	files, up, stderr = shippedLink(t, q, addr, cache,
		"-Xthinlto-distributor=--remote-group=4", "-Xthinlto-distributor=--remote-jobs=1")
	sameProgram(t, q, wantQ, "second link")
	if !strings.Contains(stderr, "--remote-group: a group's command is a /bin/sh script") || strings.Contains(stderr, "grouped into") {
		t.Errorf("second link with --remote-group: want grouping refused with a note\n%s", stderr)
	}
	if files != tree.Count || up != 0 || shippedUploads(before) != 0 || srv.Stats().Executions-execs != int64(len(q.Modules)) {
		t.Errorf("second link: %.2f MiB of toolchain uploaded (%d files), %d executions; want none uploaded and %d executed\n%s",
			up, shippedUploads(before), srv.Stats().Executions-execs, len(q.Modules), stderr)
	}
	if _, report := runThindistStdout(t, q.Dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report"); !strings.Contains(report, "files, ") ||
		!strings.Contains(report, "already in the CAS") {
		t.Errorf("thindist report of the second link does not say the toolchain was in the CAS:\n%s", report)
	}

	// A copy of clang 22 whose libclang-cpp has one byte more at its end
	// (which the loader never reads): a toolchain of its own.
	cp := copyClang(t)
	before = len(srv.Uploads())
	execs = srv.Stats().Executions
	files, up, stderr = shippedLink(t, p, addr, cache, "-Wl,--thinlto-remote-compiler="+cp)
	sameProgram(t, p, want, "changed toolchain")
	if n := srv.Stats().Executions - execs; n != int64(len(p.Modules)) {
		t.Errorf("changed toolchain: %d executions, want all %d (no stale hit)\n%s", n, len(p.Modules), stderr)
	}
	if files < 0 || up == 0 || up > 100 || shippedUploads(before) != 0 {
		t.Errorf("changed toolchain: %.2f MiB uploaded, %d files of the first tree again; want the changed library alone\n%s", up, shippedUploads(before), stderr)
	}
}

// copyClang copies clang 22 and the LLVM libraries it finds through its
// RUNPATH ($ORIGIN/../lib) to a directory of the test's, appending a byte
// to libclang-cpp, and returns the copy's path.
func copyClang(t *testing.T) string {
	t.Helper()
	f, err := toolchain.Find(clang)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	put := func(src, dst string, extra []byte) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, append(b, extra...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "bin", "clang")
	put(f.Compiler, exe, nil)
	libDir := filepath.Join(filepath.Dir(f.Compiler), "..", "lib")
	for _, l := range f.Libs {
		if filepath.Dir(l.Path) != filepath.Clean(libDir) {
			continue
		}
		var extra []byte
		if regexp.MustCompile(`^libclang-cpp`).MatchString(l.Name) {
			extra = []byte{0}
		}
		put(l.Real, filepath.Join(dir, "lib", l.Name), extra)
	}
	return exe
}

// TestRemoteToolchainDoctor: doctor says how the workers get the
// compiler and why; shipped, it runs the shipped compiler on a worker that
// sees nothing else (and the installed one fails there); a compiler that
// cannot be shipped is named, and checked as installed.
func TestRemoteToolchainDoctor(t *testing.T) {
	testsupport.Slow(t, "uploads a 265 MB toolchain (about 10 s)")
	if why := reapitest.ChrootSupported(); why != "" {
		t.Skip(why)
	}
	needClang(t)
	_, addr := fakeRemote(t, reapitest.Options{Chroot: true})
	dir := t.TempDir()
	code, out := runThindist(t, dir, nil, "doctor", "--remote=grpc://"+addr, "--compiler="+clang, "--remote-toolchain=auto")
	t.Logf("%s", out)
	if code != 0 || !strings.Contains(out, "info  the compiler is shipped with every action as inputs: no --remote-compiler") ||
		!strings.Contains(out, "ok    shipped compiler "+clang+" on a worker: ") || !strings.Contains(out, "clang version 22") {
		t.Errorf("doctor, toolchain shipped: exit %d\n%s", code, out)
	}
	code, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://"+addr, "--compiler="+clang, "--remote-toolchain=installed")
	if code != 1 || !strings.Contains(out, "info  the workers run their installed compiler: --remote-toolchain=installed") ||
		!strings.Contains(out, "FAIL  workers' compiler") {
		t.Errorf("doctor, installed compiler on a worker that has none: exit %d\n%s", code, out)
	}
	script := filepath.Join(dir, "clang-wrapper")
	os.WriteFile(script, []byte("#!/bin/sh\nexec "+clang+" \"$@\"\n"), 0o755)
	_, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://"+addr, "--compiler="+script, "--remote-toolchain=inputs")
	if !strings.Contains(out, "warn  compiler "+script+" cannot be shipped to the workers") || !strings.Contains(out, "script") {
		t.Errorf("doctor, a script as the compiler:\n%s", out)
	}
}

// TestRemoteToolchainLua links Debian's lua5.4 (lua.o and the archive
// liblua.a) with every backend on a worker chrooted into its input root,
// the compiler shipped as inputs: the interpreter is byte for byte the
// one linked here, and it runs.
func TestRemoteToolchainLua(t *testing.T) {
	testsupport.Slow(t, "builds lua5.4 and runs its backends in a chroot on a shipped toolchain")
	if why := reapitest.ChrootSupported(); why != "" {
		t.Skip(why)
	}
	b := buildLua(t, filepath.Join(t.TempDir(), "lua"))
	p := &testprog.Program{Dir: b.Dir, Objects: append(append([]string{}, b.Objects...), b.Archives...)}
	flags := append(append([]string{}, b.CFlags...), b.Libs...)
	_, addr := fakeRemote(t, reapitest.Options{Chroot: true, ChrootEnv: true, Zstd: true})

	want := localLink(t, p, flags...)
	files, _, stderr := shippedLink(t, p, addr, t.TempDir(), flags...)
	if sum := parseRemote(t, stderr); files <= 0 || sum.executed != b.Modules || sum.local != 0 {
		t.Errorf("summary %+v, toolchain files %d: want all %d backends executed on the chrooted worker\n%s", sum, files, b.Modules, stderr)
	}
	exe := filepath.Join(p.Dir, "prog-dtlto")
	sameBinary(t, "lua linked with the shipped toolchain", readFile(t, exe), want)
	out, err := exec.Command(exe, "-e", `print(string.format("%d %s", 6*7, ("x"):rep(3)))`).CombinedOutput()
	if err != nil || string(out) != "42 xxx\n" {
		t.Errorf("lua prints %q (%v)", out, err)
	}
}
