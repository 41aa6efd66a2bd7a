package jobserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exercise checks a jobserver holding one token: the implicit slot and the
// token are handed out, a third Acquire waits, and released tokens go back.
func exercise(t *testing.T, c *Client, r *os.File) {
	t.Helper()
	rel1, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rel2, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx); err == nil {
		t.Fatal("a third slot was handed out with one token and the implicit one")
	}
	rel2() // the token goes back to make
	// A waiting Acquire gets the implicit slot once it is freed.
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rel, err := c.Acquire(ctx)
		if err == nil {
			rel()
		}
		got <- err
	}()
	rel1()
	if err := <-got; err != nil {
		t.Fatalf("Acquire after a release: %v", err)
	}
	c.Close()
	// Exactly one token is back in the jobserver.
	if err := r.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	n, err := r.Read(b[:])
	if n != 1 || b[0] != '+' {
		t.Fatalf("read %d tokens %q from the jobserver after the run (%v), want the one '+'", n, b[:n], err)
	}
}

func TestFifo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "js")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	r, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("+")); err != nil {
		t.Fatal(err)
	}
	js := Inherit("-j2 --jobserver-auth=fifo:" + path)
	if js.Err != nil || js.Client == nil {
		t.Fatalf("Inherit: %+v", js)
	}
	exercise(t, js.Client, r)
}

func TestPipe(t *testing.T) {
	// Raw descriptors, as make passes them: an *os.File's Fd would already
	// be registered with the runtime poller.
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(fds[1], []byte("+")); err != nil {
		t.Fatal(err)
	}
	js := Inherit(fmt.Sprintf("-j2 --jobserver-auth=%d,%d", fds[0], fds[1]))
	if js.Err != nil || js.Client == nil {
		t.Fatalf("Inherit: %+v", js)
	}
	c := js.Client
	defer c.w.Close()
	defer c.r.Close() // the client's files own the descriptors now
	exercise(t, c, c.r)
}

func TestNoJobserver(t *testing.T) {
	for _, mf := range []string{"", "-j4", "-j4 --jobserver-auth="} {
		if js := Inherit(mf); js.Client != nil || js.Err != nil {
			t.Errorf("Inherit(%q) = %+v; want nothing", mf, js)
		}
	}
}

// pipe returns the two ends of a new pipe as raw descriptors, closed at
// the end of the test.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
	return fds[0], fds[1]
}

// TestNotAJobserver gives Inherit descriptors that are not make's
// jobserver, as a recipe without '+' gets them: closed, or reused by files
// the process opened itself. Each must be refused with the reason, and
// none touched.
func TestNotAJobserver(t *testing.T) {
	r, w := pipe(t)
	r2, w2 := pipe(t)
	file, err := os.Open("/proc/self/cgroup") // a regular file, like the runtime's cgroup files
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	reg := int(file.Fd())
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	regPath := filepath.Join(t.TempDir(), "regular")
	if err := os.WriteFile(regPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A regular file opened without close-on-exec, as a descriptor
	// inherited across exec is.
	passed, err := syscall.Open(regPath, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(passed)
	for _, c := range []struct{ auth, reason string }{
		{"999,998", "descriptors 999 and 998 were not passed to this process"},
		{fmt.Sprintf("%d,999", r), "descriptor 999 was not passed to this process"},
		// What the process opened itself at a number make named is not
		// make's, and not named as if it were.
		{fmt.Sprintf("%d,%d", reg, w), fmt.Sprintf("descriptor %d was not passed to this process", reg)},
		{fmt.Sprintf("%d,%d", r, reg), fmt.Sprintf("descriptor %d was not passed to this process", reg)},
		// A file really passed at that number is named.
		{fmt.Sprintf("%d,%d", passed, w), fmt.Sprintf("descriptor %d is not a pipe (%s)", passed, regPath)},
		{fmt.Sprintf("%d,%d", w, r), fmt.Sprintf("descriptor %d is not open for reading", w)},
		{fmt.Sprintf("%d,%d", r, r), fmt.Sprintf("descriptor %d is not open for writing", r)},
		{fmt.Sprintf("%d,%d", r, w2), fmt.Sprintf("descriptors %d and %d are not the two ends of one pipe", r, w2)},
		{fmt.Sprintf("%d,%d", r2, w), "are not the two ends of one pipe"},
		{"x", "not of the form R,W or fifo:PATH"},
		{"3,", "not of the form"},
		{"fifo:" + filepath.Join(t.TempDir(), "missing"), "no such file"},
		{"fifo:" + regPath, "is not a FIFO"},
	} {
		js := Inherit("-j2 --jobserver-auth=" + c.auth)
		if js.Client != nil || js.Err == nil {
			t.Errorf("--jobserver-auth=%s was accepted", c.auth)
			continue
		}
		if !strings.Contains(js.Err.Error(), c.reason) {
			t.Errorf("--jobserver-auth=%s: %v; want the reason %q", c.auth, js.Err, c.reason)
		}
		if strings.Contains(js.Err.Error(), "/proc/self/cgroup") {
			t.Errorf("--jobserver-auth=%s: %v names a file this process opened itself", c.auth, js.Err)
		}
		if !strings.HasPrefix(c.auth, "fifo:") && !strings.Contains(js.Err.Error(), "mark it with '+'") {
			t.Errorf("--jobserver-auth=%s: %v does not say how to share make's slots", c.auth, js.Err)
		}
	}
	// The refused descriptors are untouched: still blocking, still open.
	for _, fd := range []int{r, w, r2, w2, reg} {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK != 0 {
			t.Errorf("descriptor %d after the checks: flags %#x, %v", fd, fl, err)
		}
	}
	// A FIFO, named, is accepted: make 4.4's form.
	if js := Inherit("--jobserver-auth=fifo:" + fifo); js.Client == nil {
		t.Errorf("the FIFO %s was refused: %v", fifo, js.Err)
	} else {
		js.Client.r.Close()
	}
}

// TestBroken reads a token from a jobserver whose every writer is gone (as
// when the descriptors were not make's after all): Acquire reports
// ErrBroken, at once and from then on, rather than an error a module would
// fail with; the implicit slot still works.
func TestBroken(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	js := Inherit(fmt.Sprintf("--jobserver-auth=%d,%d", fds[0], fds[1]))
	if js.Client == nil {
		t.Fatal(js.Err)
	}
	c := js.Client
	defer c.r.Close() // the client's files own the descriptors now
	c.w.Close()       // the only writer: reads now see EOF
	rel, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatalf("the implicit slot: %v", err)
	}
	defer rel()
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Acquire(ctx)
		cancel()
		if !errors.Is(err, ErrBroken) {
			t.Fatalf("Acquire %d from a jobserver at EOF: %v; want ErrBroken", i, err)
		}
	}
}
