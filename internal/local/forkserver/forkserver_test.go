package forkserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var llvmBin = testprog.LLVMBin()

// shim builds the shim once per test with the test toolchain's clang.
func shim(t *testing.T) string {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang")
	so, err := BuildShim(t.Context(), filepath.Join(llvmBin, "clang"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return so
}

func start(t *testing.T, compiler string, env ...string) *Server {
	t.Helper()
	if env == nil {
		env = os.Environ()
	}
	s, err := Start(t.Context(), compiler, shim(t), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func run(t *testing.T, s *Server, ctx context.Context, dir string, argv ...string) (Status, string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	st, err := s.Run(ctx, Job{Argv: argv, Dir: dir, Stdout: &out, Stderr: &errb}, 2*time.Second)
	return st, out.String(), errb.String(), err
}

// TestJobIsTheProgram: a forked job gets its own argv, working directory,
// environment, output streams and process group, and its exit status.
func TestJobIsTheProgram(t *testing.T) {
	s := start(t, "/bin/sh", "FOO=bar baz", "PATH="+os.Getenv("PATH"))
	dir := t.TempDir()
	st, out, errOut, err := run(t, s, t.Context(), dir,
		"sh", "-c", `echo "$0 $1 $FOO"; pwd; echo $$ $(ps -o pgid= -p $$); echo oops >&2; exit 3`, "zero", "one")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "zero one bar baz" || lines[1] != dir {
		t.Fatalf("stdout %q", out)
	}
	if f := strings.Fields(lines[2]); len(f) != 2 || f[0] != f[1] {
		t.Errorf("the job does not lead its process group: pid and pgid %q", lines[2])
	}
	if errOut != "oops\n" || st.ExitCode != 3 || st.Signal != "" {
		t.Errorf("stderr %q, status %+v", errOut, st)
	}
	// The environment is the jobs' only: nothing of the server's own
	// (LD_PRELOAD, the socket's descriptor) leaks.
	s = start(t, "/bin/sh", "A=1")
	_, out, _, err = run(t, s, t.Context(), dir, "sh", "-c", "env")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "A=1\nPWD="+dir && strings.TrimSpace(out) != "PWD="+dir+"\nA=1" {
		t.Errorf("environment %q", out)
	}
}

// TestSignalAndCancel: a job killed by a signal reports it; a cancelled
// job's whole process group is stopped and Run returns ctx's error.
func TestSignalAndCancel(t *testing.T) {
	s := start(t, "/bin/sh")
	st, _, _, err := run(t, s, t.Context(), "/", "sh", "-c", "kill -KILL $$")
	if err != nil || st.Signal != "killed" || st.ExitCode != -1 {
		t.Fatalf("status %+v, %v", st, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	pidFile := filepath.Join(t.TempDir(), "pid")
	go func() {
		for {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	began := time.Now()
	// The group's SIGTERM reaches the grandchild too.
	_, _, _, err = run(t, s, ctx, "/", "sh", "-c", "sleep 60 & echo $! > "+pidFile+"; wait")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	t.Logf("cancelled in %v", time.Since(began))
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("no grandchild pid in %q", b)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's grandchild %d survived the cancellation", pid)
		}
	}
}

// TestServerDeath: when the server dies, running jobs are killed and
// reported unavailable (the caller runs them again with exec), and so is
// every later job.
func TestServerDeath(t *testing.T) {
	s := start(t, "/bin/sh")
	done := make(chan error, 1)
	go func() {
		_, _, _, err := run(t, s, t.Context(), "/", "sh", "-c", "sleep 60")
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	s.proc.Kill()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("job of a dead server: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job of a dead server did not return")
	}
	if _, _, _, err := run(t, s, t.Context(), "/", "sh", "-c", "true"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a job after the server died: %v", err)
	}
}

// TestRefused: what the shim cannot serve is refused with ErrUnavailable,
// never run wrongly: a script (its interpreter would read the job's argv
// as a script name), a static executable (it ignores LD_PRELOAD), a job
// with an empty argument.
func TestRefused(t *testing.T) {
	so := shim(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "cc.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), script, so, nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a script: %v", err)
	}
	static := filepath.Join(dir, "static")
	src := filepath.Join(dir, "static.c")
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command(filepath.Join(llvmBin, "clang"), "-static", "-o", static, src).CombinedOutput(); err != nil {
		t.Logf("no static executable to test with: %v\n%s", err, out)
	} else if _, err := Start(t.Context(), static, so, nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a static executable: %v", err)
	}
	s := start(t, "/bin/sh")
	if _, _, _, err := run(t, s, t.Context(), "/", "sh", "-c", "true", ""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("an empty argument: %v", err)
	}
	if _, _, _, err := run(t, s, t.Context(), "/", "sh", strings.Repeat("x", requestMax)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("oversized arguments: %v", err)
	}
	if _, err := Start(t.Context(), "/bin/sh", so, []string{"X=" + strings.Repeat("x", requestMax)}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("an oversized environment: %v", err)
	}
}

// TestClangObjectsIdentical: clang forked from the server writes the same
// object as clang exec'd, for a plain compile and for a ThinLTO backend.
func TestClangObjectsIdentical(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang", "ld.lld")
	clang := filepath.Join(llvmBin, "clang")
	s := start(t, clang)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int g(int);\nint f(int x) { return g(x) * 3 + 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.c"), []byte("int g(int x) { return x ^ 0x5a; }\n"), 0o644)
	execRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command(clang, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("clang %v: %v\n%s", args, err, out)
		}
	}
	forkRun := func(args ...string) {
		t.Helper()
		st, _, errOut, err := run(t, s, t.Context(), dir, append([]string{clang}, args...)...)
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("forked clang %v: %+v %v\n%s", args, st, err, errOut)
		}
		if st.CPU <= 0 {
			t.Errorf("no CPU time reported for %v", args)
		}
	}
	for _, m := range []string{"a", "b"} {
		execRun("-O2", "-flto=thin", "-c", m+".c", "-o", m+".o")
	}
	cmd := exec.Command(filepath.Join(llvmBin, "ld.lld"), "--thinlto-index-only", "-shared", "a.o", "b.o", "-o", "/dev/null")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("thin link: %v\n%s", err, out)
	}
	for _, job := range [][]string{
		{"-O2", "-c", "a.c", "-o", "%s.plain.o"},
		{"-O2", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "%s.backend.o"},
	} {
		name := func(who string) []string {
			out := append([]string(nil), job...)
			out[len(out)-1] = strings.Replace(out[len(out)-1], "%s", who, 1)
			return out
		}
		execRun(name("exec")...)
		forkRun(name("fork")...)
		a, _ := os.ReadFile(filepath.Join(dir, name("exec")[len(job)-1]))
		b, _ := os.ReadFile(filepath.Join(dir, name("fork")[len(job)-1]))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%v: the forked clang's object differs (%d vs %d bytes)", job, len(b), len(a))
		}
	}
	// A compile error: exit status and diagnostics as exec'd.
	os.WriteFile(filepath.Join(dir, "bad.c"), []byte("int f( {\n"), 0o644)
	st, _, errOut, err := run(t, s, t.Context(), dir, clang, "-c", "bad.c", "-o", "bad.o")
	if err != nil || st.ExitCode != 1 || !strings.Contains(errOut, "bad.c:1:") {
		t.Errorf("compile error: %+v %v %q", st, err, errOut)
	}
}

// TestPoolBuildsOnceAndRemembersFailures: the shim is built once; a
// compiler that cannot be served is warned about once and refused after.
func TestPoolBuildsOnceAndRemembersFailures(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang")
	dir := t.TempDir()
	var warnings []string
	p := NewPool(dir, os.Environ(), func(f string, a ...any) { warnings = append(warnings, f) })
	defer p.Close()
	var out, errb bytes.Buffer
	clang := filepath.Join(llvmBin, "clang")
	for range 3 {
		if st, err := p.Run(t.Context(), Job{Argv: []string{clang, "--version"}, Dir: "/", Stdout: &out, Stderr: &errb}, time.Second); err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v %v", st, err)
		}
	}
	if n := strings.Count(out.String(), "clang version"); n != 3 {
		t.Errorf("%d version lines from 3 jobs", n)
	}
	if sos, _ := filepath.Glob(filepath.Join(dir, "*.so")); len(sos) != 1 {
		t.Errorf("shims built: %v", sos)
	}
	script := filepath.Join(t.TempDir(), "cc.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	for range 2 {
		if _, err := p.Run(t.Context(), Job{Argv: []string{script}, Dir: "/", Stdout: &out, Stderr: &errb}, time.Second); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a script through the pool: %v", err)
		}
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q about a wrapper script, want none", warnings)
	}
	// A compiler that should have served but did not is worth a word, once.
	static := filepath.Join(t.TempDir(), "static")
	src := static + ".c"
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command(clang, "-static", "-o", static, src).CombinedOutput(); err != nil {
		t.Skipf("no static executable to test with: %v\n%s", err, out)
	}
	for range 2 {
		if _, err := p.Run(t.Context(), Job{Argv: []string{static}, Dir: "/", Stdout: &out, Stderr: &errb}, time.Second); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a static executable through the pool: %v", err)
		}
	}
	if len(warnings) != 1 {
		t.Errorf("warnings %q, want one", warnings)
	}
}

// TestStuckServerDoesNotHoldAnInterrupt: a server that does not answer
// (stopped here) does not keep a cancelled job waiting; the job it forks
// once it answers again is killed at once.
func TestStuckServerDoesNotHoldAnInterrupt(t *testing.T) {
	s := start(t, "/bin/sh")
	if err := syscall.Kill(s.proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, _, _, err := run(t, s, ctx, "/", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a job of a stopped server: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("the cancelled job took %v to return", d)
	}
	syscall.Kill(s.proc.Pid(), syscall.SIGCONT)
	// The server takes requests in order: once a later job has run, the
	// abandoned one has been forked and reported, and so killed.
	if st, _, _, err := run(t, s, t.Context(), "/", "sh", "-c", "true"); err != nil || st.ExitCode != 0 {
		t.Fatalf("a job after the server resumed: %+v %v", st, err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		return // killed before its shell wrote anything
	}
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned job %d still runs", pid)
		}
	}
}

// alive reports whether pid runs; a killed orphan stays a zombie until its
// new parent reaps it, and counts as dead.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestShimFromAStandInCompiler: a compiler that exits 0 and writes
// whatever it likes (a stand-in that writes an object header to -o) does
// not leave a broken shim behind: the pool builds it with its C compiler
// instead, and the stand-in is forked like any ELF program.
func TestShimFromAStandInCompiler(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang")
	clang := filepath.Join(llvmBin, "clang")
	dir := t.TempDir()
	src := filepath.Join(dir, "standin.c")
	os.WriteFile(src, []byte(`#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-o")) { FILE *f = fopen(argv[i + 1], "w"); fputs("\177ELF junk", f); fclose(f); }
	puts("stand-in");
	return 0;
}
`), 0o644)
	standin := filepath.Join(dir, "standin")
	if out, err := exec.Command(clang, "-o", standin, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := BuildShim(t.Context(), standin, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no ELF shared object") {
		t.Errorf("BuildShim with the stand-in: %v", err)
	}
	var warnings []string
	p := NewPool(t.TempDir(), os.Environ(), func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) })
	p.CC = clang
	defer p.Close()
	var out bytes.Buffer
	st, err := p.Run(t.Context(), Job{Argv: []string{standin}, Dir: dir, Stdout: &out, Stderr: io.Discard}, time.Second)
	if err != nil || st.ExitCode != 0 || out.String() != "stand-in\n" || len(warnings) != 0 {
		t.Errorf("the stand-in through the pool: %+v %v %q, warnings %q", st, err, out.String(), warnings)
	}
}

// TestShimBuildLeavesNoTemporaries: the compiler's temporaries go to a
// directory of the build's own, removed afterwards, so a compiler killed
// mid-build (a cancelled link) leaves nothing in the user's TMPDIR.
func TestShimBuildLeavesNoTemporaries(t *testing.T) {
	userTmp, dir := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", userTmp)
	seen := filepath.Join(t.TempDir(), "tmpdir")
	cc := filepath.Join(t.TempDir(), "cc")
	// A compiler that leaves its intermediate object behind and fails, as
	// one killed between compiling and linking does.
	os.WriteFile(cc, []byte("#!/bin/sh\necho \"$TMPDIR\" > "+seen+"\n: > \"$TMPDIR/shim-123456.o\"\nexit 1\n"), 0o755)
	if _, err := BuildShim(t.Context(), cc, dir); err == nil {
		t.Fatal("BuildShim with a failing compiler succeeded")
	}
	got, _ := os.ReadFile(seen)
	if tmp := strings.TrimSpace(string(got)); !strings.HasPrefix(tmp, dir+string(filepath.Separator)) {
		t.Errorf("the compiler's TMPDIR was %q, not a directory inside %s", tmp, dir)
	}
	for _, d := range []string{userTmp, dir} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("%s holds %v after the build", d, left)
		}
	}
}
