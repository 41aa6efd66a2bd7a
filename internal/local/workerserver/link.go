package workerserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/sys/describe"
)

// LinkWorkers is a link's use of the worker server: a worker.Workers
// that reaches (or starts) the server at the link's first job (Connect),
// and is a worker.Pool of the link's own when no server can be, with a
// warning. A link whose every action is cached reaches nothing.
type LinkWorkers struct {
	o         ConnectOptions
	own       worker.Options
	connected func(*Client)
	warn      func(string, ...any)

	once   sync.Once
	w      worker.Workers
	client *Client // nil: no server (w is the link's own Pool)
}

// NewLinkWorkers returns the server's workers as o names them, or a Pool
// with own's options when no server can be reached; connected, if set,
// hears the client once the server is reached.
func NewLinkWorkers(o ConnectOptions, own worker.Options, connected func(*Client), warn func(string, ...any)) *LinkWorkers {
	return &LinkWorkers{o: o, own: own, connected: connected, warn: warn}
}

// Run runs the job on the server's workers, or on the link's own.
func (l *LinkWorkers) Run(ctx context.Context, dir string, argv, env []string) (*worker.Outcome, error) {
	w, _ := l.reach()
	return w.Run(ctx, dir, argv, env)
}

// Describe names the server's workers in the runner chain, with the
// link's own pool they may turn out to be (describe.Describer).
func (l *LinkWorkers) Describe() describe.Node {
	return describe.Node{Name: "WorkerServer", Notes: []string{"else WorkerPool"}}
}

// reach reaches (or starts) the server at the first call. It returns the
// workers the link uses and the server's client, nil when the link uses
// workers of its own.
func (l *LinkWorkers) reach() (worker.Workers, *Client) {
	l.once.Do(func() {
		cl, err := Connect(l.o)
		if err != nil {
			l.warn("no worker server: %v; the workers live for this link only", err)
			l.w = worker.NewPool(l.own)
			return
		}
		l.w, l.client = cl, cl
		if l.connected != nil {
			l.connected(cl)
		}
	})
	return l.w, l.client
}

// Close ends the link's use of the workers; a link that ran no job
// reaches nothing.
func (l *LinkWorkers) Close() {
	l.once.Do(func() {})
	if l.w != nil {
		l.w.Close()
	}
}

// ServerForks is a proc.Runner that forks on the worker server's fork
// servers, warm across links, the jobs the server's workers do not take
// (another compiler than theirs, options they are not tested with, a
// race's niced try); next runs them when the link has no server
// (LinkWorkers fell back on a Pool of its own), or the server cannot (a
// compiler it cannot fork, a job whose output streams).
type ServerForks struct {
	workers *LinkWorkers
	next    proc.Runner
	n       atomic.Int64
}

// NewServerForks returns the Runner that forks on workers' server before
// next.
func NewServerForks(workers *LinkWorkers, next proc.Runner) *ServerForks {
	return &ServerForks{workers: workers, next: next}
}

// Describe names the runner and wraps next (describe.Describer).
func (f *ServerForks) Describe() describe.Node {
	return describe.Node{Name: "ServerForks", Wraps: []any{f.next}}
}

func (f *ServerForks) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	if _, cl := f.workers.reach(); cl != nil && len(c.Argv) > 0 && c.Stdout == nil && len(c.ExtraFiles) == 0 {
		res, err := cl.Fork(ctx, c)
		if !errors.Is(err, forkserver.ErrUnavailable) {
			if err == nil {
				f.n.Add(1)
			}
			return res, err
		}
	}
	return f.next.Run(ctx, c)
}

// Forked is how many jobs the server forked.
func (f *ServerForks) Forked() int64 { return f.n.Load() }
