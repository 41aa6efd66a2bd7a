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

	"github.com/thindist/thindist/internal/worker"
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
	cc, err := cl.get()
	if err != nil {
		return &worker.Outcome{Elsewhere: "no worker server: " + err.Error()}, nil
	}
	if err := worker.WriteMessage(cc.c, jobRequest(dir, argv, env)); err != nil {
		cc.c.Close()
		return &worker.Outcome{Elsewhere: cl.fail(fmt.Sprintf("the worker server ended (%v)", err))}, nil
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
		cc.c.Close() // the server kills the job's worker
		<-done
		return nil, ctx.Err()
	case rp = <-done:
	}
	o, err := rp.f, rp.err
	if err == nil {
		var out *worker.Outcome
		if out, err = decodeOutcome(o); err == nil {
			cl.put(cc)
			return out, nil
		}
	}
	cc.c.Close()
	return &worker.Outcome{Rerun: cl.fail(fmt.Sprintf("the worker server ended mid-job (%v)", err))}, nil
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
