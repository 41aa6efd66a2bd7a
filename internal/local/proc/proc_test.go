package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as a thindist stand-in that starts
// a process and is then killed (see runHelper).
func TestMain(m *testing.M) {
	if pidFile := os.Getenv("PROC_TEST_HELPER"); pidFile != "" {
		helper(pidFile)
		return
	}
	os.Exit(m.Run())
}

// helper runs a shell that writes its pid to pidFile and sleeps, as
// thindist runs a compiler. Meanwhile goroutines lock threads and exit,
// which ends their threads: whichever thread forked the shell, the shell
// must live as long as this process does.
func helper(pidFile string) {
	go func() {
		for {
			done := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(done)
			}()
			<-done
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := Exec{}.Run(context.Background(), &Cmd{Argv: []string{"sh", "-c", "echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; exec sleep 600"}})
	fmt.Fprintf(os.Stderr, "helper: the process ended: %+v %v\n", res, err)
	os.Exit(3)
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || len(stat) < i+3 || stat[i+2] != 'Z'
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits (a generous safety net, no threshold) for pid to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived its parent", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiesWithParent: SIGKILL of the process that ran a command (nothing
// of it can clean up) still ends the command, even while the runtime ends
// threads around it.
func TestDiesWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "PROC_TEST_HELPER="+pidFile)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(waitFile(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let threads end meanwhile
	if !alive(pid) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the command died while its parent lived: %s", out.String())
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(t, pid)
}

func TestExecResult(t *testing.T) {
	res, err := Exec{}.Run(t.Context(), &Cmd{Argv: []string{"sh", "-c", "echo out; echo err >&2; pwd; exit 3"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n/\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 || !res.Failed() || res.Status() != "exit status 3" {
		t.Fatalf("%+v", res)
	}
	// sh's own peak is below this test's: what Linux reports for it may be
	// the test's (vfork), so it is unknown.
	if res.MaxRSS != 0 || res.By != ByExec {
		t.Errorf("MaxRSS %d, by %v", res.MaxRSS, res.By)
	}
	// A program that holds more than the test ever did: its own peak.
	const big = 256 << 20
	res, err = Exec{}.Run(t.Context(), &Cmd{Argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=" + fmt.Sprint(big), "count=1"}})
	if err != nil || res.Failed() {
		t.Fatalf("%+v %v", res, err)
	}
	if res.MaxRSS < big || res.MaxRSS > 8*big {
		t.Errorf("MaxRSS %d of a program that held %d bytes", res.MaxRSS, big)
	}

	var w bytes.Buffer
	res, err = Exec{}.Run(t.Context(), &Cmd{Argv: []string{"sh", "-c", "echo to-writer; kill -KILL $$"}, Stdout: &w})
	if err != nil || res.Signal != "killed" || res.ExitCode != -1 || w.String() != "to-writer\n" || res.Stdout != nil {
		t.Fatalf("%+v %v %q", res, err, w.String())
	}

	_, err = Exec{}.Run(t.Context(), &Cmd{Argv: []string{"/nonexistent/cc"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/cc") {
		t.Fatalf("a missing program: %v", err)
	}
}

// TestExecCancel: cancellation stops the whole process group, grandchildren
// included, and the error says it was cancelled through any wrapping.
func TestExecCancel(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		waitFile(t, pidFile)
		cancel()
	}()
	// The shell ignores SIGTERM: the group's SIGKILL after the grace ends it.
	res, err := Exec{Grace: 100 * time.Millisecond}.Run(ctx, &Cmd{Argv: []string{"sh", "-c",
		"trap '' TERM; sleep 600 & echo $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; echo started; wait; wait"}})
	if !errors.Is(fmt.Errorf("wrapped: %w", err), context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if res == nil || string(res.Stdout) != "started\n" {
		t.Errorf("the output before the cancellation is lost: %+v", res)
	}
	pid, _ := strconv.Atoi(waitFile(t, pidFile))
	waitGone(t, pid)
}

func TestCapture(t *testing.T) {
	var c Capture
	big := strings.Repeat("x", CaptureLimit+12345)
	n, err := io.Copy(&c, strings.NewReader("warning: a\n"+big))
	if err != nil || n != int64(len(big))+11 {
		t.Fatalf("copied %d, %v", n, err)
	}
	if len(c.Bytes()) != CaptureLimit || !bytes.HasPrefix(c.Bytes(), []byte("warning: a\nxxx")) {
		t.Fatalf("kept %d bytes starting %q", len(c.Bytes()), c.Bytes()[:20])
	}
}

// TestExecNice: a command with Nice runs that much lower than thindist
// (the shell waits until it does; without it the test's deadline ends it),
// and relative to thindist's own priority: run again under nice -n 5, the
// test wants 12.
func TestExecNice(t *testing.T) {
	base := 0
	if os.Getenv("THINDIST_TEST_NICED") == "" {
		if nice, err := exec.LookPath("nice"); err == nil {
			cmd := exec.Command(nice, "-n", "5", os.Args[0], "-test.run=^TestExecNice$")
			cmd.Env = append(os.Environ(), "THINDIST_TEST_NICED=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("under nice -n 5: %v\n%s", err, out)
			}
		}
	} else {
		base = 5
	}
	want := strconv.Itoa(base + 7)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := Exec{}.Run(ctx, &Cmd{Argv: []string{"/bin/sh", "-c",
		`while [ "$(nice)" != ` + want + ` ]; do sleep 0.01; done; nice`}, Nice: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != want {
		t.Errorf("niceness %q, want %s", got, want)
	}
}
