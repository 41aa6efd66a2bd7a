package forkserver

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForkedCmdline: ps and top show a forked compiler's own command line
// (/proc/PID/cmdline) and /proc/PID/environ holds its own environment, as
// for an exec'd compiler, not the server's. Users are not root: when the
// test runs as root it runs again as nobody, without capabilities.
func TestForkedCmdline(t *testing.T) {
	clang := filepath.Join(llvmBin, "clang")
	env := []string{"PATH=" + os.Getenv("PATH"), "THINDIST_TEST_JOB=forked cmdline"}
	s := start(t, clang, env...)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "src.c")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{clang, "-c", "-x", "c", "-DMARKER=a b", fifo, "-o", filepath.Join(dir, "src.o")}
	done := make(chan error, 1)
	var st Status
	go func() {
		var err error
		st, _, _, err = run(t, s, t.Context(), dir, argv...)
		done <- err
	}()
	// The job blocks reading the FIFO: find it among the server's children.
	var pid int
	for deadline := time.Now().Add(time.Minute); pid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the forked job never appeared")
		}
		pid = childOf(s.proc.Pid())
	}
	// The child shows up before it has renamed itself: read until it shows
	// the job's argv, or it has long been blocked on the FIFO (then the
	// comparison below fails).
	want := strings.Join(argv, "\x00") + "\x00"
	var cmdline, environ []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if cmdline, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil {
			t.Fatal(err)
		}
		environ, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if string(cmdline) == want || time.Now().After(deadline) {
			break
		}
	}
	// Let the compile finish.
	if err := os.WriteFile(fifo, []byte("int x = 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || st.ExitCode != 0 {
		t.Fatalf("the job: %+v %v", st, err)
	}
	if string(cmdline) != want {
		t.Errorf("/proc/%d/cmdline %q, want the job's argv %q", pid, cmdline, want)
	}
	if want := strings.Join(env, "\x00") + "\x00"; string(environ) != want {
		t.Errorf("/proc/%d/environ %q, want the job's %q", pid, environ, want)
	}
	if os.Getuid() != 0 {
		status, _ := os.ReadFile("/proc/self/status")
		t.Logf("ran as uid %d: %s", os.Getuid(), bytes.TrimSpace(status[bytes.Index(status, []byte("CapEff")):][:24]))
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("cannot run the test unprivileged: %v", err)
	}
	// Not t.TempDir: its parent is private to root.
	tmp, err := os.MkdirTemp("", "thindist-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(tmp, "forkserver.test")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe, "-test.run=^TestForkedCmdline$", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestForkedCmdline")) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}

// childOf returns a child process of pid, or 0.
func childOf(ppid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			return pid
		}
	}
	return 0
}
