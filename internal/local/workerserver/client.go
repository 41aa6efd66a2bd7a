package workerserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/sys/describe"
	"golang.org/x/sys/unix"
)

// Client is the worker.Workers of a link whose jobs run on the server's
// workers: one connection per job running at once, each kept for later
// jobs, and on it a worker the server lends (server.lend), which the
// link's jobs are then written to directly, until the link ends or the
// worker has served its jobs. A server that ends mid-job (killed,
// stopped) has the job rerun by exec and the link's later jobs go to the
// next runner.
type Client struct {
	dir     string
	hello   []string
	pid     int  // the server's
	started bool // this client started the server

	mu   sync.Mutex
	idle []*conn // with no worker lent
	lent []*conn // with a worker lent, idle
	gone string  // why the server is no longer used
}

type conn struct {
	c     *net.UnixConn
	r     *bufio.Reader
	close sync.Once
	// loan is the worker lent on the connection, nil if none; compiler
	// the identity of the compiler file it was lent for (the server
	// checked that one: worker.Identify).
	loan     *worker.Borrowed
	compiler string
	started  bool // the server started the worker for the loan: said with its first job
	pidfd    int  // the lent worker's, -1 if none
}

// end closes the connection: the server kills the worker lent on it.
// The pidfd is closed with it and forgotten, so that no later abort
// signals through a descriptor number since reused (another loan's).
func (cc *conn) end() {
	cc.close.Do(func() {
		cc.c.Close()
		if cc.pidfd >= 0 {
			unix.Close(cc.pidfd)
			cc.pidfd = -1
		}
	})
}

// abort ends the worker lent on cc: the server kills it as the connection
// closes, and so does this process, should the server not (stopped).
func (cc *conn) abort() {
	if cc.pidfd >= 0 {
		unix.PidfdSendSignal(cc.pidfd, unix.SIGKILL, nil, 0)
	}
	cc.end()
}

// PID is the server's process ID.
func (cl *Client) PID() int { return cl.pid }

// String describes the server for a link's record: its pid and socket,
// and whether this link started it.
func (cl *Client) String() string {
	s := fmt.Sprintf("the worker server, pid %d, %s", cl.pid, Socket(cl.dir))
	if cl.started {
		s += ", started by this link"
	}
	return s
}

// Describe names the server's workers in a runner chain
// (describe.Describer); String describes the server itself.
func (cl *Client) Describe() describe.Node { return describe.Node{Name: "WorkerServer"} }

// open connects to the server and says hello.
func (cl *Client) open() (*conn, error) {
	c, err := dial(cl.dir)
	if err != nil {
		return nil, err
	}
	// A refused connection is answered whatever it sends: read it even if
	// the hello could not be written whole.
	werr := worker.WriteMessage(c, cl.hello)
	r := bufio.NewReader(c)
	f, err := worker.ReadMessage(r, 16)
	switch {
	case err != nil && werr != nil:
		err = werr
	case err != nil:
	case len(f) == 2 && f[0] == "ok":
		pid, perr := strconv.Atoi(f[1])
		if perr == nil && (cl.pid == 0 || cl.pid == pid) {
			cl.pid = pid
			return &conn{c: c, r: r, pidfd: -1}, nil
		}
		err = fmt.Errorf("another server (pid %s) answers at %s", f[1], Socket(cl.dir))
	case len(f) == 2 && f[0] == "stale":
		err = fmt.Errorf("the server at %s is making way for a new one: %s", Socket(cl.dir), f[1])
	case len(f) == 2 && f[0] == "refused":
		err = fmt.Errorf("the server at %s refused: %s", Socket(cl.dir), f[1])
	default:
		err = fmt.Errorf("the server at %s answered %q", Socket(cl.dir), f)
	}
	c.Close()
	return nil, err
}

// Run implements worker.Workers: on a worker lent for argv[0], the
// compiler as its file is now (worker.Identify: a compiler replaced since,
// or a name that resolves to another file, is checked again), asking the
// server for one if no idle connection has it.
func (cl *Client) Run(ctx context.Context, dir string, argv, env []string) (*worker.Outcome, error) {
	_, compiler, err := worker.Identify(argv[0], dir, env)
	if err != nil {
		compiler = "" // the server's check says why
	}
	cc := cl.getLent(compiler)
	if cc == nil {
		if cc, err = cl.get(); err != nil {
			return &worker.Outcome{Elsewhere: "no worker server: " + err.Error()}, nil
		}
		if why := cl.lease(cc, dir, argv, env); why != "" {
			return &worker.Outcome{Elsewhere: why}, nil
		}
		cc.compiler = compiler
	}
	o, err := cc.loan.Run(ctx, dir, argv, env)
	if o != nil && cc.started {
		o.Started, cc.started = true, false
	}
	switch {
	case err != nil || o.Rerun != "": // the worker is gone
		if err == nil && serverGone(cc) {
			// It died with its server: the link's later jobs go elsewhere.
			o.Rerun = cl.fail(fmt.Sprintf("the worker server ended mid-job (%s)", o.Rerun))
		}
		cc.loan.Close()
		cc.end()
	case !cc.loan.Usable() || compiler == "":
		cl.giveBack(cc)
		cl.put(cc)
	default:
		cl.putLent(cc)
	}
	return o, err
}

// lease asks the server for a worker on cc for the job (dir, argv, env);
// why says why none was lent (cc then is idle again, or closed).
func (cl *Client) lease(cc *conn, dir string, argv, env []string) (why string) {
	if err := worker.WriteMessage(cc.c, appendCommand([]string{"lease"}, dir, argv, env)); err != nil {
		cc.end()
		return cl.fail(fmt.Sprintf("the worker server ended (%v)", err))
	}
	f, fds, err := readWithFDs(cc)
	if err != nil || len(f) == 0 || f[0] == "leased" && (len(f) != 4 || len(fds) < 2 || len(fds) > 3) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		cc.end()
		if err == nil {
			err = fmt.Errorf("a malformed answer to a lease: %q with %d descriptors", f, len(fds))
		}
		return cl.fail(fmt.Sprintf("the worker server ended (%v)", err))
	}
	if f[0] != "leased" {
		cl.put(cc)
		if len(f) == 2 && f[0] == "elsewhere" {
			return f[1]
		}
		return fmt.Sprintf("the worker server answered %q", f[0])
	}
	pid, err1 := strconv.Atoi(f[1])
	left, err2 := strconv.Atoi(f[2])
	in, out := os.NewFile(uintptr(fds[0]), "worker stdin"), os.NewFile(uintptr(fds[1]), "worker stdout")
	pidfd := -1
	if len(fds) == 3 {
		pidfd = fds[2]
	}
	if err1 != nil || err2 != nil {
		in.Close()
		out.Close()
		if pidfd >= 0 {
			syscall.Close(pidfd)
		}
		cc.end()
		return cl.fail(fmt.Sprintf("the worker server ended (a malformed lease %q)", f))
	}
	cc.pidfd = pidfd
	cc.loan = worker.Borrow(pid, in, out, left, worker.Options{}, cc.abort)
	cc.started = f[3] == "1"
	return ""
}

// readWithFDs reads one message from cc and the descriptors sent with
// it: they come with its first byte, which a buffered read would drop.
func readWithFDs(cc *conn) ([]string, []int, error) {
	if cc.r.Buffered() > 0 {
		return nil, nil, fmt.Errorf("%d bytes the server did not answer", cc.r.Buffered())
	}
	buf, oob := make([]byte, 4096), make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := cc.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			got, err := syscall.ParseUnixRights(&m)
			if err != nil {
				return nil, fds, err
			}
			fds = append(fds, got...)
		}
	}
	// The rest of a message longer than one read follows on the stream.
	f, err := worker.ReadMessage(bufio.NewReader(io.MultiReader(bytes.NewReader(buf[:n]), cc.r)), 16)
	return f, fds, err
}

// serverGone says whether the server of cc, which sends nothing while a
// worker is lent on it, has ended: its socket reads at its end. A server
// that ends closes its socket before its workers are killed with it.
func serverGone(cc *conn) bool {
	cc.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := cc.r.ReadByte()
	cc.c.SetReadDeadline(time.Time{})
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// giveBack returns the worker lent on cc to the server.
func (cl *Client) giveBack(cc *conn) {
	jobs, peak := cc.loan.Usage()
	cc.loan.Close()
	cc.loan = nil
	if cc.pidfd >= 0 {
		unix.Close(cc.pidfd)
		cc.pidfd = -1
	}
	if worker.WriteMessage(cc.c, returnRequest(jobs, peak)) != nil {
		cc.end()
	}
}

// Fork runs c on one of the server's fork servers, kept warm across links
// for the jobs its workers do not take (forks.go): c.Argv in c.Dir with
// c.Env (nil: this process's), c.Nice. c must not stream its output or be
// given descriptors. An error wrapping forkserver.ErrUnavailable means the
// job did not run to its end there (no server, it cannot fork that
// compiler, it ended mid-job): run it another way.
func (cl *Client) Fork(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	req := *c
	if req.Env == nil {
		req.Env = os.Environ()
	}
	if req.Dir == "" {
		req.Dir, _ = os.Getwd()
	}
	start := time.Now()
	f, err := cl.call(ctx, forkRequest(&req))
	var ended *serverEnded
	if errors.As(err, &ended) {
		return nil, fmt.Errorf("%w: %v", forkserver.ErrUnavailable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s stopped: %w", c.Argv[0], err)
	}
	a, err := decodeForked(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", forkserver.ErrUnavailable, cl.fail(fmt.Sprintf("the worker server ended mid-job (%v)", err)))
	}
	if a.elsewhere != "" {
		return nil, fmt.Errorf("%w: the worker server's: %s", forkserver.ErrUnavailable, a.elsewhere)
	}
	return &proc.Result{Exit: proc.Exit{ExitCode: a.st.ExitCode, Signal: a.st.Signal}, CPU: a.st.CPU, MaxRSS: a.st.MaxRSS,
		Wall: time.Since(start), Stdout: a.stdout, Stderr: a.stderr, By: proc.ByForkServer}, nil
}

// serverEnded is a request the server could not answer: it was not sent
// (before: no server, or it ended before the request), or the server ended
// while it ran.
type serverEnded struct {
	before bool
	why    string
}

func (e *serverEnded) Error() string { return e.why }

// call sends req on an idle connection (or a new one) and returns the
// answer; when ctx ends first the connection closes (the server then kills
// the job) and call returns ctx's error.
func (cl *Client) call(ctx context.Context, req []string) ([]string, error) {
	cc, err := cl.get()
	if err != nil {
		return nil, &serverEnded{before: true, why: "no worker server: " + err.Error()}
	}
	if err := worker.WriteMessage(cc.c, req); err != nil {
		cc.end()
		return nil, &serverEnded{before: true, why: cl.fail(fmt.Sprintf("the worker server ended (%v)", err))}
	}
	type reply struct {
		f   []string
		err error
	}
	done := make(chan reply, 1)
	go func() {
		f, err := worker.ReadMessage(cc.r, 16)
		done <- reply{f, err}
	}()
	var rp reply
	select {
	case <-ctx.Done():
		cc.end() // the server kills the job
		<-done
		return nil, ctx.Err()
	case rp = <-done:
	}
	if rp.err != nil {
		cc.end()
		return nil, &serverEnded{why: cl.fail(fmt.Sprintf("the worker server ended mid-job (%v)", rp.err))}
	}
	cl.put(cc)
	return rp.f, nil
}

// get takes an idle connection or opens one.
func (cl *Client) get() (*conn, error) {
	cl.mu.Lock()
	if cl.gone != "" {
		defer cl.mu.Unlock()
		return nil, errors.New(cl.gone)
	}
	if n := len(cl.idle); n > 0 {
		cc := cl.idle[n-1]
		cl.idle = cl.idle[:n-1]
		cl.mu.Unlock()
		return cc, nil
	}
	cl.mu.Unlock()
	return cl.open()
}

func (cl *Client) put(cc *conn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.gone != "" {
		cc.end()
		return
	}
	cl.idle = append(cl.idle, cc)
}

// getLent takes an idle connection with a worker lent for compiler, nil if
// there is none.
func (cl *Client) getLent(compiler string) *conn {
	if compiler == "" {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i := len(cl.lent) - 1; i >= 0; i-- {
		if cc := cl.lent[i]; cc.compiler == compiler {
			cl.lent = append(cl.lent[:i], cl.lent[i+1:]...)
			return cc
		}
	}
	return nil
}

func (cl *Client) putLent(cc *conn) {
	cl.mu.Lock()
	if cl.gone == "" {
		cl.lent = append(cl.lent, cc)
		cc = nil
	}
	cl.mu.Unlock()
	if cc != nil {
		cl.giveBack(cc)
		cc.end()
	}
}

// fail notes that the server cannot be used any more (the first reason
// stays), closes the idle connections and returns why.
func (cl *Client) fail(why string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.gone == "" {
		cl.gone = why
	}
	for _, cc := range cl.idle {
		cc.end()
	}
	for _, cc := range cl.lent {
		cl.giveBack(cc)
		cc.end()
	}
	cl.idle, cl.lent = nil, nil
	return why
}

// Close implements worker.Workers: the link's connections close, the
// server keeps its workers.
func (cl *Client) Close() { cl.fail("closed") }

// linkName names this link to the server, which counts the links it
// serves: the process and when the client was made.
func linkName() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
}
