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
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client hands out job slots backed by make's tokens. It satisfies
// executor.Limiter.
type Client struct {
	r, w *os.File

	mu       sync.Mutex
	implicit bool   // the implicit token is free
	held     []byte // tokens read and not yet returned
	closed   bool
	broken   error // why reading a token failed for good; nil while it works
}

// ErrBroken is the error of Acquire once make's jobserver has failed (a
// read of EOF or EBADF): it no longer hands out tokens, and the caller
// should go on without it rather than fail a job for it.
var ErrBroken = errors.New("make's jobserver stopped working")

// Inherited is the jobserver make gave this process: a client for it, or
// why there is none.
type Inherited struct {
	// Client is nil when MAKEFLAGS names no jobserver or it cannot be used.
	Client *Client
	// Err says why the jobserver MAKEFLAGS names cannot be used (a
	// *NotAvailableError); nil when there is a client or none is named.
	Err error
}

// NotAvailableError says why the jobserver that MAKEFLAGS names is not one
// this process can use.
type NotAvailableError struct {
	Auth   string // the --jobserver-auth value
	Reason string // what is wrong with it
}

func (e *NotAvailableError) Error() string {
	if strings.HasPrefix(e.Auth, "fifo:") {
		return fmt.Sprintf("make's jobserver %s cannot be used: %s", e.Auth, e.Reason)
	}
	// What make 4.3 does to a recipe without '+': the likely cause.
	return fmt.Sprintf("make's jobserver is not available to this recipe (mark it with '+' to share make's job slots): "+
		"MAKEFLAGS names --jobserver-auth=%s, and %s", e.Auth, e.Reason)
}

// Inherit returns the jobserver that makeflags (this process's MAKEFLAGS)
// names, after checking that it is one.
//
// It must run at the start of the process, before the process opens
// anything itself. make 4.3 passes --jobserver-auth=R,W to every recipe
// but keeps the descriptors open only for recipes marked '+' (or that
// mention $(MAKE)): for the others, R and W are free numbers in this process
// and whatever it opens first takes them. A later check could find a pipe
// this process made for a child there, and read its own child's output as
// tokens. At the start, what can sit at R and W without being make's is
// what the Go runtime and package initialisers opened (cgroup files, the
// poller's epoll and eventfd descriptors): all close-on-exec, which no
// inherited descriptor is, so they are refused as not passed (notPassed)
// rather than named as make's. Those checks are what make documents for a client:
// both descriptors open, both FIFOs, the read and write end of one pipe,
// open for reading and for writing.
func Inherit(makeflags string) Inherited {
	auth := authOf(makeflags)
	if auth == "" {
		return Inherited{}
	}
	var c *Client
	var err error
	if path, ok := strings.CutPrefix(auth, "fifo:"); ok {
		c, err = openFifo(path)
	} else {
		c, err = openPipe(auth)
	}
	if err != nil {
		return Inherited{Err: &NotAvailableError{Auth: auth, Reason: err.Error()}}
	}
	return Inherited{Client: c}
}

// authOf returns the jobserver that makeflags names, or "".
func authOf(makeflags string) string {
	auth := ""
	for _, f := range strings.Fields(makeflags) {
		for _, p := range []string{"--jobserver-auth=", "--jobserver-fds="} {
			if strings.HasPrefix(f, p) {
				auth = strings.TrimPrefix(f, p) // the last one wins, as in make
			}
		}
	}
	return auth
}

// openFifo opens make 4.4's named jobserver, which every recipe may use.
func openFifo(path string) (*Client, error) {
	// O_RDWR: opening a FIFO for reading alone would block until a writer
	// comes; with both, open returns at once, and Linux allows it.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not a FIFO", path)
	}
	return &Client{r: f, w: f, implicit: true}, nil
}

// openPipe takes the inherited descriptors "R,W" after checking that they
// are what make documents: the read and the write end of one pipe.
func openPipe(auth string) (*Client, error) {
	rs, ws, ok := strings.Cut(auth, ",")
	rfd, err1 := strconv.Atoi(rs)
	wfd, err2 := strconv.Atoi(ws)
	if !ok || err1 != nil || err2 != nil || rfd < 0 || wfd < 0 {
		return nil, errors.New("that is not of the form R,W or fifo:PATH")
	}
	if missing := notPassed(rfd, wfd); missing != "" {
		return nil, errors.New(missing)
	}
	var rst, wst unix.Stat_t
	for _, d := range []struct {
		fd   int
		st   *unix.Stat_t
		mode int // an access mode it needs besides O_RDWR
	}{{rfd, &rst, unix.O_RDONLY}, {wfd, &wst, unix.O_WRONLY}} {
		if err := unix.Fstat(d.fd, d.st); err != nil {
			return nil, fmt.Errorf("descriptor %d: %w", d.fd, err)
		}
		if d.st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return nil, fmt.Errorf("descriptor %d is not a pipe%s", d.fd, describe(d.fd))
		}
		fl, err := unix.FcntlInt(uintptr(d.fd), unix.F_GETFL, 0)
		if err != nil {
			return nil, fmt.Errorf("descriptor %d: %w", d.fd, err)
		}
		if acc := fl & unix.O_ACCMODE; acc != d.mode && acc != unix.O_RDWR {
			return nil, fmt.Errorf("descriptor %d is not open for %s", d.fd, map[int]string{unix.O_RDONLY: "reading", unix.O_WRONLY: "writing"}[d.mode])
		}
	}
	if rst.Dev != wst.Dev || rst.Ino != wst.Ino {
		return nil, fmt.Errorf("descriptors %d and %d are not the two ends of one pipe", rfd, wfd)
	}
	// A non-blocking descriptor lets the runtime poller wait for a token with
	// a deadline, so a cancelled link never strands a read (and the token it
	// would take) in the kernel. make copes with non-blocking reads: several
	// clients race for every token anyway.
	if err := unix.SetNonblock(rfd, true); err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", rfd, err)
	}
	return &Client{r: os.NewFile(uintptr(rfd), "jobserver-r"), w: os.NewFile(uintptr(wfd), "jobserver-w"), implicit: true}, nil
}

// notPassed says which of make's descriptors rfd and wfd this process did
// not inherit ("descriptor 4 was not passed to this process"), or "". A
// descriptor is inherited when it is open without close-on-exec: every
// descriptor that survived the exec that started this process has the flag
// clear, and everything Go opens (the runtime's cgroup files, the poller's
// epoll and eventfd descriptors) has it set. So a number make named but
// did not pass, which this process's own files took meanwhile, is told
// apart from a file make really passed, and is not named as if it were
// make's.
func notPassed(rfd, wfd int) string {
	both := []int{rfd, wfd}
	if rfd == wfd {
		both = both[:1]
	}
	var fds []string
	for _, fd := range both {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC != 0 {
			fds = append(fds, strconv.Itoa(fd))
		}
	}
	switch len(fds) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("descriptor %s was not passed to this process", fds[0])
	}
	return fmt.Sprintf("descriptors %s and %s were not passed to this process", fds[0], fds[1])
}

// describe names what descriptor fd refers to, for an error message about
// a descriptor this process inherited: " (/tmp/log)", or "".
func describe(fd int) string {
	// readlink opens nothing, so it cannot take a descriptor number itself.
	if target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil {
		return " (" + target + ")"
	}
	return ""
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
		if err := c.brokenErr(); err != nil {
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
			return nil, c.breakDown(err)
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			time.Sleep(5 * time.Millisecond) // a descriptor the poller could not take
		}
	}
}

// breakDown records that reading a token failed with err (EOF: every
// writer is gone; EBADF: the descriptor was closed) and returns the error
// every Acquire returns from now on.
func (c *Client) breakDown(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = fmt.Errorf("%w (reading a token: %v)", ErrBroken, err)
	}
	return c.broken
}

func (c *Client) brokenErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
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
