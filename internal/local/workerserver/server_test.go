package workerserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// serve runs a server in dir (made if needed), in this process, until the
// test ends, and returns its directory: this installation's in dir.
func serve(t *testing.T, base string) string {
	t.Helper()
	w := testprog.Worker(t)
	dir := ownDir(t, base, w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, Options{Dir: base, Worker: w, Idle: time.Hour}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := QueryStatus(dir); err == nil {
			return dir
		} else if !errors.Is(err, ErrNoServer) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// ownDir is the directory in base of the server of this test binary with
// worker w.
func ownDir(t *testing.T, base, w string) string {
	t.Helper()
	exe, _ := os.Executable()
	id, err := Own(exe, w)
	if err != nil {
		t.Fatal(err)
	}
	return InstallDir(base, id)
}

// client is a Client of the server in dir, as a link of this thindist
// (the test binary) with the server's worker makes.
func client(t *testing.T, dir string) *Client {
	t.Helper()
	exe, _ := os.Executable()
	id, err := Own(exe, testprog.Worker(t))
	if err != nil {
		t.Fatal(err)
	}
	cl := &Client{dir: dir, hello: append([]string{"hello", linkName()}, id.fields()...)}
	if err := cl.first(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestClientGoneKillsTheJob: a link whose context ends mid-job closes its
// connection, and the server kills that job's worker. The job stalls on
// its index, a FIFO nobody writes, until then.
func TestClientGoneKillsTheJob(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	cl := client(t, dir)
	bin := testprog.LLVMBin()
	testprog.NeedLLVM(t, bin, "clang")
	clang := filepath.Join(bin, "clang")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "a.c"), []byte("int a(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(clang, "-flto=thin", "-O2", "-c", filepath.Join(work, "a.c"), "-o", filepath.Join(work, "a.o")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := syscall.Mkfifo(filepath.Join(work, "a.o.thinlto.bc"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{clang, "-c", "-O2", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "a.native.o"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cl.Run(ctx, work, argv, os.Environ())
		done <- err
	}()
	// Opening the FIFO to write waits for its reader, the worker, which
	// then waits for bytes that never come.
	fifo, err := os.OpenFile(filepath.Join(work, "a.o.thinlto.bc"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	busy := waitFor(t, dir, func(st *Status) bool { return st.Workers.Busy == 1 })
	pid := reader(t, filepath.Join(work, "a.o.thinlto.bc"))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled job: %v", err)
	}
	waitFor(t, dir, func(st *Status) bool { return st.Workers.Busy == 0 })
	for deadline := time.Now().Add(time.Minute); !Gone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker (pid %d) of the job its client left still runs (%+v)", pid, busy.Workers)
		}
	}
}

// waitFor polls the server's status until ok holds (a minute at most).
func waitFor(t *testing.T, dir string, ok func(*Status) bool) *Status {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st, err := QueryStatus(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's status never came to what the test waits for: %+v", st)
		}
	}
}

// reader returns the pid of the process other than this one that has fifo
// open.
func reader(t *testing.T, fifo string) int {
	t.Helper()
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		var pid int
		fmt.Sscanf(fd, "/proc/%d/", &pid)
		if target, err := os.Readlink(fd); err == nil && target == fifo && pid != os.Getpid() {
			return pid
		}
	}
	t.Fatalf("no process has %s open", fifo)
	return 0
}

// TestRefusesOtherUsers: a connection from another user is refused, what
// it asks (here its status) unanswered. The socket is made reachable to
// that user for the test (a server's is not: its directory is 0700), so
// that the peer's credentials are what refuses it.
func TestRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the test connects as another user (uid 65534) through SysProcAttr.Credential")
	}
	if os.Getenv("THINDIST_TEST_SOCKET") != "" {
		t.Skip("the helper process of TestRefusesOtherUsers")
	}
	// The server's directory and this test binary, where user 65534 can
	// reach them: that user runs the binary to ask the server its status
	// (TestRawClient).
	pub, err := os.MkdirTemp("", "thindist-refuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	dir := serve(t, filepath.Join(pub, "server"))
	exe, _ := os.Executable()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "client.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pub, filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	os.Chmod(Socket(dir), 0o777)
	cmd := exec.Command(bin, "-test.run=^TestRawClient$", "-test.v")
	cmd.Env = append(os.Environ(), "THINDIST_TEST_SOCKET="+Socket(dir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as user 65534: %v\n%s", err, out)
	}
	if want := `answer: ["refused" "this thindist server serves user 0 only; you are user 65534"]`; !strings.Contains(string(out), want) {
		t.Errorf("user 65534 was answered:\n%s\nwant %s", out, want)
	}
	if st := waitFor(t, dir, func(*Status) bool { return true }); st.Refused != 1 {
		t.Errorf("the server counts %d refused connections, want 1", st.Refused)
	}
}

// TestRawClient is TestRefusesOtherUsers's helper process: it asks the
// server at $THINDIST_TEST_SOCKET its status and prints the answer.
func TestRawClient(t *testing.T) {
	path := os.Getenv("THINDIST_TEST_SOCKET")
	if path == "" {
		t.Skip("run by TestRefusesOtherUsers")
	}
	// Not dial, which itself refuses a server of another user.
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	worker.WriteMessage(c, []string{"status"})
	f, err := worker.ReadMessage(bufio.NewReader(c), 16)
	fmt.Printf("answer: %q %v\n", f, err)
}

// TestStatusDoesNotKeepItAlive: status queries are not links: a server
// asked its status every 200 ms still exits once its idle period has
// passed since it started (no link came).
func TestStatusDoesNotKeepItAlive(t *testing.T) {
	w := testprog.Worker(t)
	base := filepath.Join(t.TempDir(), "server")
	dir := ownDir(t, base, w)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), Options{Dir: base, Worker: w, Idle: time.Second}) }()
	answered := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if answered == 0 {
				t.Fatal("the server exited before it answered a status query")
			}
			return
		default:
		}
		if _, err := QueryStatus(dir); err == nil {
			answered++
		}
	}
	t.Fatalf("the server still runs 20 s after it started with an idle period of 1 s, asked its status %d times", answered)
}
