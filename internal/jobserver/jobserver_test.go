package jobserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	c, err := FromMakeflags("-j2 --jobserver-auth=fifo:" + path)
	if err != nil || c == nil {
		t.Fatalf("FromMakeflags: %v, %v", c, err)
	}
	exercise(t, c, r)
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
	c, err := FromMakeflags(fmt.Sprintf("-j2 --jobserver-auth=%d,%d", fds[0], fds[1]))
	if err != nil || c == nil {
		t.Fatalf("FromMakeflags: %v, %v", c, err)
	}
	defer c.w.Close()
	defer c.r.Close() // the client's files own the descriptors now
	exercise(t, c, c.r)
}

func TestNoJobserver(t *testing.T) {
	for _, mf := range []string{"", "-j4", "--jobserver-auth=999,998"} {
		c, err := FromMakeflags(mf)
		if c != nil || err != nil {
			t.Errorf("FromMakeflags(%q) = %v, %v; want nil, nil", mf, c, err)
		}
	}
	for _, mf := range []string{"--jobserver-auth=x", "--jobserver-auth=fifo:/nonexistent/fifo"} {
		if _, err := FromMakeflags(mf); err == nil {
			t.Errorf("FromMakeflags(%q) accepted", mf)
		}
	}
}
