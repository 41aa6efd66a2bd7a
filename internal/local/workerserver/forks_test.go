package workerserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// fork runs argv on the server's fork servers through cl.
func fork(t *testing.T, cl *Client, ctx context.Context, dir string, env []string, argv ...string) (*proc.Result, error) {
	t.Helper()
	return cl.Fork(ctx, &proc.Cmd{Argv: argv, Dir: dir, Env: env})
}

// stdout is what a forked job printed, "" if it did not run.
func stdout(res *proc.Result) string {
	if res == nil {
		return ""
	}
	return string(res.Stdout)
}

// TestForkWarmAcrossLinks: a job forked by the server is the program, in
// its directory, with its environment, output and status; the next link
// with the same environment uses the same fork server, a link with
// another environment another one.
func TestForkWarmAcrossLinks(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	work := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "FOO=bar baz"}
	for i := range 2 {
		res, err := fork(t, client(t, dir), t.Context(), work, env, "sh", "-c", `echo "$0 $FOO"; pwd; echo oops >&2; exit 3`, "zero")
		if err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
		if string(res.Stdout) != "zero bar baz\n"+work+"\n" || string(res.Stderr) != "oops\n" || res.Exit.ExitCode != 3 || res.By != proc.ByForkServer {
			t.Errorf("link %d: stdout %q, stderr %q, %+v, by %v", i, res.Stdout, res.Stderr, res.Exit, res.By)
		}
	}
	// A race's speculative try runs niced, below the fork server (which
	// runs at this test's priority; the system call answers 20 - nice).
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client(t, dir).Fork(t.Context(), &proc.Cmd{Argv: []string{"sh", "-c", "nice"}, Dir: work, Env: env, Nice: 7})
	if want := fmt.Sprintf("%d\n", min(20-prio+7, 19)); err != nil || stdout(res) != want {
		t.Errorf("a job niced by 7: %v, %q; want %q", err, stdout(res), want)
	}
	if st, err := QueryStatus(dir); err != nil || st.ForkServers != 1 || st.Forked != 3 {
		t.Fatalf("after three links of one environment: %+v, %v; want 1 fork server, 3 jobs forked", st, err)
	}
	res, err = fork(t, client(t, dir), t.Context(), work, []string{"PATH=/usr/bin:/bin", "FOO=other"}, "sh", "-c", `echo $FOO`)
	if err != nil || stdout(res) != "other\n" {
		t.Fatalf("another environment: %v, %q", err, stdout(res))
	}
	if st, err := QueryStatus(dir); err != nil || st.ForkServers != 2 || st.Forked != 4 {
		t.Errorf("after a link of another environment: %+v, %v; want 2 fork servers, 4 jobs forked", st, err)
	}
}

// TestForkFollowsTheCompilerFile: a compiler name that now resolves to
// another file (a symbolic link retargeted), or whose file was replaced
// (an upgrade), is forked from a server of what is there now, not from the
// one started for the old; a job that cannot be forked (a script) is
// answered so, for the link to run it another way.
func TestForkFollowsTheCompilerFile(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	cl := client(t, dir)
	bin := t.TempDir()
	env := []string{"PATH=" + bin + ":/usr/bin:/bin"}
	tool := filepath.Join(bin, "tool")
	which := func(what string, want string) {
		t.Helper()
		res, err := fork(t, cl, t.Context(), "/", env, "tool", "-c", `[ -n "$BASH_VERSION" ] && echo bash || echo dash`)
		if err != nil || strings.TrimSpace(stdout(res)) != want {
			t.Errorf("%s: %v, %q; want %s", what, err, stdout(res), want)
		}
	}
	for _, target := range []string{"dash", "bash"} {
		os.Remove(tool)
		if err := os.Symlink("/usr/bin/"+target, tool); err != nil {
			t.Fatal(err)
		}
		which("tool → /usr/bin/"+target, target)
	}
	for _, target := range []string{"dash", "bash"} {
		b, err := os.ReadFile("/usr/bin/" + target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tool+".new", b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tool+".new", tool); err != nil {
			t.Fatal(err)
		}
		which("tool, a copy of /usr/bin/"+target, target)
	}
	script := filepath.Join(bin, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := fork(t, cl, t.Context(), "/", env, "script"); !errors.Is(err, forkserver.ErrUnavailable) {
		t.Errorf("a script: %v; want it unavailable", err)
	}
}

// TestForkServerReplacedOnDisk: a server one of whose fork servers runs a
// program replaced on disk since (an upgraded compiler) admits no more
// links: they start a new server.
func TestForkServerReplacedOnDisk(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	bin := t.TempDir()
	sh := filepath.Join(bin, "sh")
	b, err := os.ReadFile("/usr/bin/dash")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sh, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := fork(t, client(t, dir), t.Context(), "/", []string{"PATH=/usr/bin:/bin"}, sh, "-c", "true"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sh+".new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sh+".new", sh); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	id, err := Own(exe, testprog.Worker(t))
	if err != nil {
		t.Fatal(err)
	}
	cl := &Client{dir: dir, hello: append([]string{"hello", linkName()}, id.fields()...)}
	if err := cl.first(); err == nil || !strings.Contains(err.Error(), sh+", which a fork server runs, was replaced on disk") {
		t.Errorf("a link after the fork server's program was replaced: %v", err)
	}
}

// TestForkClientGone: a link whose context ends mid-job gets its context's
// error at once, and the server kills the forked job.
func TestForkClientGone(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	cl := client(t, dir)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		defer cancel()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
				return
			}
		}
	}()
	_, err := fork(t, cl, ctx, "/", []string{"PATH=/usr/bin:/bin"}, "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled job: %v; want its context's error", err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("no pid in %q", b)
	}
	for deadline := time.Now().Add(20 * time.Second); !Gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the forked job (pid %d) still runs after its link left", pid)
		}
	}
}

// TestForkServerDies: a fork server killed mid-job has its job answered
// unavailable (the link runs it another way), and the next job of that
// compiler and environment is forked from a new one.
func TestForkServerDies(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	cl := client(t, dir)
	env := []string{"PATH=/usr/bin:/bin"}
	// The job's parent is its fork server.
	if _, err := fork(t, cl, t.Context(), "/", env, "sh", "-c", "kill -KILL $PPID; sleep 10"); !errors.Is(err, forkserver.ErrUnavailable) {
		t.Fatalf("the job of a fork server killed under it: %v; want it unavailable", err)
	}
	res, err := fork(t, cl, t.Context(), "/", env, "sh", "-c", "echo again")
	if err != nil {
		t.Fatalf("the next job: %v; want it forked from a new fork server", err)
	}
	if string(res.Stdout) != "again\n" {
		t.Errorf("the next job printed %q", res.Stdout)
	}
	if st, err := QueryStatus(dir); err != nil || st.ForkServers != 1 || st.Forked != 1 {
		t.Errorf("after a fork server died and another started: %+v, %v; want 1 fork server, 1 job forked", st, err)
	}
}
