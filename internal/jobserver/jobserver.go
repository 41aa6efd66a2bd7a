// Package jobserver is a client of GNU make's jobserver, so that several
// links started by one `make -jN` share N slots instead of each taking every
// CPU.
//
// make passes the jobserver in MAKEFLAGS as --jobserver-auth=R,W (two
// inherited pipe descriptors) or, from make 4.4, --jobserver-auth=fifo:PATH.
// Each job after the first needs one token, a byte read from the jobserver,
// and must write the same byte back when it ends. The first job runs on the
// token make already holds for this process.
package jobserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Client hands out job slots backed by make's tokens. It satisfies
// executor.Limiter.
type Client struct {
	r, w *os.File

	mu       sync.Mutex
	implicit bool   // the implicit token is free
	held     []byte // tokens read and not yet returned
	closed   bool
}

// FromMakeflags returns a client for the jobserver that makeflags names, or
// nil if it names none or its descriptors are not open (make did not mark
// the rule as recursive with '+', which is not an error: then make did not
// mean this process to take part).
func FromMakeflags(makeflags string) (*Client, error) {
	auth := ""
	for _, f := range strings.Fields(makeflags) {
		for _, p := range []string{"--jobserver-auth=", "--jobserver-fds="} {
			if strings.HasPrefix(f, p) {
				auth = strings.TrimPrefix(f, p) // the last one wins, as in make
			}
		}
	}
	if auth == "" {
		return nil, nil
	}
	if path, ok := strings.CutPrefix(auth, "fifo:"); ok {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("opening make's jobserver fifo %s: %w", path, err)
		}
		return &Client{r: f, w: f, implicit: true}, nil
	}
	rs, ws, ok := strings.Cut(auth, ",")
	if !ok {
		return nil, fmt.Errorf("unrecognised jobserver in MAKEFLAGS: %q", auth)
	}
	rfd, err1 := strconv.Atoi(rs)
	wfd, err2 := strconv.Atoi(ws)
	if err1 != nil || err2 != nil || rfd < 0 || wfd < 0 {
		return nil, fmt.Errorf("unrecognised jobserver in MAKEFLAGS: %q", auth)
	}
	var st syscall.Stat_t
	if syscall.Fstat(rfd, &st) != nil || syscall.Fstat(wfd, &st) != nil {
		return nil, nil
	}
	// A non-blocking descriptor lets the runtime poller wait for a token with
	// a deadline, so a cancelled link never strands a read (and the token it
	// would take) in the kernel. make copes with non-blocking reads: several
	// clients race for every token anyway.
	if err := syscall.SetNonblock(rfd, true); err != nil {
		return nil, fmt.Errorf("jobserver read descriptor %d: %w", rfd, err)
	}
	r := os.NewFile(uintptr(rfd), "jobserver-r")
	w := os.NewFile(uintptr(wfd), "jobserver-w")
	if r == nil || w == nil {
		return nil, nil
	}
	return &Client{r: r, w: w, implicit: true}, nil
}

// takeImplicit takes the implicit token if it is free.
func (c *Client) takeImplicit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.implicit {
		return false
	}
	c.implicit = false
	return true
}

// Acquire waits for a slot: the implicit token if free, else a token from
// make. The returned function gives it back.
func (c *Client) Acquire(ctx context.Context) (func(), error) {
	if c.takeImplicit() {
		return c.releaseImplicit, nil
	}
	var b [1]byte
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Wake up now and then to notice cancellation and a freed implicit
		// token: another job may have finished while this one waited on make.
		c.r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := c.r.Read(b[:])
		if n == 1 {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				c.w.Write(b[:])
				return nil, errors.New("jobserver client closed")
			}
			c.held = append(c.held, b[0])
			c.mu.Unlock()
			return func() { c.release(b[0]) }, nil
		}
		if c.takeImplicit() {
			return c.releaseImplicit, nil
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR) {
			return nil, fmt.Errorf("reading a token from make's jobserver: %w", err)
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			time.Sleep(5 * time.Millisecond) // a descriptor the poller could not take
		}
	}
}

func (c *Client) releaseImplicit() {
	c.mu.Lock()
	c.implicit = true
	c.mu.Unlock()
}

func (c *Client) release(tok byte) {
	c.mu.Lock()
	found := false
	for i, h := range c.held {
		if h == tok {
			c.held = append(c.held[:i], c.held[i+1:]...)
			found = true
			break
		}
	}
	c.mu.Unlock()
	if found { // else Close already gave it back
		c.w.Write([]byte{tok})
	}
}

// Close returns every token still held to make. It must run before exit,
// also on a signal: a token that is never written back is a slot make has
// lost for the rest of the build.
func (c *Client) Close() {
	c.mu.Lock()
	held := c.held
	c.held, c.closed = nil, true
	c.mu.Unlock()
	if len(held) > 0 {
		c.w.Write(held)
	}
}
