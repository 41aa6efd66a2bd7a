package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/forkserver"
)

// Limiter bounds how many processes run on this machine at once. The local
// executor holds a slot for the life of each compiler process.
type Limiter interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Semaphore is a Limiter of n slots.
type Semaphore chan struct{}

// NewSemaphore returns a Limiter of n slots (at least 1).
func NewSemaphore(n int) Semaphore { return make(Semaphore, max(n, 1)) }

// Acquire takes a slot, waiting for one or for ctx.
func (s Semaphore) Acquire(ctx context.Context) (func(), error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// LocalOptions configures NewLocal.
type LocalOptions struct {
	// Limiter bounds concurrent processes; nil means unbounded.
	Limiter Limiter
	// Env is the compiler's environment; nil inherits this process's.
	Env []string
	// KillDelay is how long a cancelled compiler has between SIGTERM (which
	// lets clang remove its own temporary files) and SIGKILL.
	KillDelay time.Duration
	// ForkServers, if not nil, forks compilers from a server started once
	// per compiler instead of exec'ing each; a job the pool cannot take
	// (forkserver.ErrUnavailable) is exec'd as usual. Its environment must
	// be Env.
	ForkServers *forkserver.Pool
}

// NewLocal returns an executor that runs each action as a process on this
// machine, without a shell. Actions whose inputs live under other names than
// the command uses (Action.Mapped) run in a private directory of links laid
// out by Action.Layout; all others run in place in their working directory.
func NewLocal(opts LocalOptions) Executor {
	if opts.KillDelay == 0 {
		opts.KillDelay = 5 * time.Second
	}
	if opts.Env == nil {
		// Read once: with a nil Env, os/exec copies and deduplicates the
		// whole environment for every process, which was the largest source
		// of garbage on big links.
		opts.Env = os.Environ()
	}
	return &local{opts: opts}
}

type local struct {
	opts LocalOptions
	seq  atomic.Int64
}

func (l *local) Execute(ctx context.Context, a *action.Action, out []string) (*Result, error) {
	dir := a.Dir
	if a.Mapped() {
		sandbox, err := l.sandbox(a, out[0])
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(sandbox.root)
		dir = sandbox.workDir
	}
	argv := a.Argv(func(i int) string { return a.Inputs[i].Path }, func(i int) string { return out[i] })

	if l.opts.Limiter != nil {
		release, err := acquire(ctx, l.opts.Limiter, a)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if l.opts.ForkServers != nil {
		res, err := l.fork(ctx, a, argv, dir)
		if !errors.Is(err, forkserver.ErrUnavailable) {
			return res, err
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = l.opts.Env
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The compiler leads a process group of its own, and cancellation
	// signals the whole group: a compiler wrapper (a shell script, ccache,
	// distcc) does not pass SIGTERM on to the compiler it runs, which would
	// otherwise survive thindist, keep running, and hold the stderr pipe
	// open so that Wait only returns after KillDelay.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = l.opts.KillDelay
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil && cmd.Process != nil {
		// Whatever of the group ignored SIGTERM.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res := &Result{Where: Local, Wall: time.Since(start), Stdout: stdout.b, Stderr: stderr.b}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return res, fmt.Errorf("%s: cannot run the compiler %q: %w", a.ID, argv[0], err)
	}
	return res, nil
}

// fork runs argv through the fork-server pool, with the same process
// group, cancellation and output capture as an exec'd compiler.
func (l *local) fork(ctx context.Context, a *action.Action, argv []string, dir string) (*Result, error) {
	// The first job of a compiler starts its server, and jobs arriving
	// meanwhile wait for it: that start-up is not the job's own time
	// (the pool reports it in its Stats).
	srv, err := l.opts.ForkServers.Server(ctx, argv[0])
	if errors.Is(err, forkserver.ErrUnavailable) {
		return nil, err
	}
	var stdout, stderr capped
	start := time.Now()
	var st forkserver.Status
	if err == nil {
		st, err = srv.Run(ctx, argv, dir, &stdout, &stderr, l.opts.KillDelay)
	}
	if errors.Is(err, forkserver.ErrUnavailable) {
		return nil, err
	}
	res := &Result{Where: Local, Wall: time.Since(start), Stdout: stdout.b, Stderr: stderr.b,
		CPU: st.CPU, ExitCode: st.ExitCode, Signal: st.Signal, Forked: true}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil {
		return res, fmt.Errorf("%s: cannot run the compiler %q: %w", a.ID, argv[0], err)
	}
	return res, nil
}

type sandbox struct{ root, workDir string }

// sandbox lays out a's inputs as links in a fresh directory beside the
// staging area (so it is cleaned up with it).
func (l *local) sandbox(a *action.Action, stagedOut string) (*sandbox, error) {
	layout, err := a.LocalLayout()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.ID, err)
	}
	root := filepath.Join(filepath.Dir(stagedOut), fmt.Sprintf("sandbox-%d", l.seq.Add(1)))
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(layout.WorkDir)), 0o755); err != nil {
		return nil, err
	}
	for _, d := range layout.Dirs {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(d)), 0o755); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	for _, f := range layout.Files {
		dst := filepath.Join(root, filepath.FromSlash(f.RootPath))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.Symlink(a.Abs(a.Inputs[f.Input].Local()), dst)
		}
		if err != nil {
			os.RemoveAll(root)
			return nil, fmt.Errorf("%s: placing %s: %w", a.ID, a.Inputs[f.Input].Path, err)
		}
	}
	return &sandbox{root: root, workDir: filepath.Join(root, filepath.FromSlash(layout.WorkDir))}, nil
}

// capped keeps the first 1 MiB written to it: enough for any diagnostic,
// bounded for a compiler that floods its output.
type capped struct{ b []byte }

const captureLimit = 1 << 20

func (c *capped) Write(p []byte) (int, error) {
	if room := captureLimit - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// scratch holds the read buffers of capped.ReadFrom.
var scratch = sync.Pool{New: func() any { return new([4096]byte) }}

// ReadFrom drains r (the compiler's stdout or stderr pipe: os/exec copies it
// with io.Copy, which uses ReadFrom when there is one). Without it io.Copy
// allocates a 32 KiB buffer per stream per job although compilers rarely
// print anything: 640 MB of garbage for 10,000 jobs, which drove thindist's
// peak RSS over 50 MiB. A pooled buffer makes a silent compiler cost no
// allocation at all.
func (c *capped) ReadFrom(r io.Reader) (int64, error) {
	buf := scratch.Get().(*[4096]byte)
	defer scratch.Put(buf)
	var n int64
	for {
		k, err := r.Read(buf[:])
		if k > 0 {
			n += int64(k)
			c.Write(buf[:k])
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
