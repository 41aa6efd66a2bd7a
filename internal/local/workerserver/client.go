package workerserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/sys/describe"
)

// Client is the worker.Workers of a link whose jobs run on the server:
// one connection per job running at once, each kept for later jobs. A
// server that ends mid-job (killed, stopped) has the job rerun by exec and
// the link's later jobs go to the next runner.
type Client struct {
	dir     string
	hello   []string
	pid     int  // the server's
	started bool // this client started the server

	mu   sync.Mutex
	idle []*conn
	gone string // why the server is no longer used
}

type conn struct {
	c *net.UnixConn
	r *bufio.Reader
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
			return &conn{c: c, r: r}, nil
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

// Run implements worker.Workers.
func (cl *Client) Run(ctx context.Context, dir string, argv, env []string) (*worker.Outcome, error) {
	f, err := cl.call(ctx, jobRequest(dir, argv, env))
	var ended *serverEnded
	switch {
	case errors.As(err, &ended) && ended.before:
		return &worker.Outcome{Elsewhere: err.Error()}, nil
	case errors.As(err, &ended):
		return &worker.Outcome{Rerun: err.Error()}, nil
	case err != nil:
		return nil, err
	}
	o, err := decodeOutcome(f)
	if err != nil {
		return &worker.Outcome{Rerun: cl.fail(fmt.Sprintf("the worker server ended mid-job (%v)", err))}, nil
	}
	return o, nil
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
		cc.c.Close()
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
		cc.c.Close() // the server kills the job
		<-done
		return nil, ctx.Err()
	case rp = <-done:
	}
	if rp.err != nil {
		cc.c.Close()
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
		cc.c.Close()
		return
	}
	cl.idle = append(cl.idle, cc)
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
		cc.c.Close()
	}
	cl.idle = nil
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
