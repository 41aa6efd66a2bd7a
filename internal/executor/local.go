package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/describe"
)

// LocalOptions configures NewLocal.
type LocalOptions struct {
	// Limiter is what each process waits for (this machine's process
	// slots, or make's token alone in a slot granted above); nil means
	// unbounded.
	Limiter Limiter
	// Env is the compiler's environment; nil inherits this process's.
	Env []string
	// Runner runs the compiler processes: proc.Exec, or a fork-server
	// pool's runner (whose environment must then be Env). nil means
	// proc.Exec{}.
	Runner proc.Runner
	// Nice lowers the compilers' priority (proc.Cmd.Nice): for the
	// executor that runs a race's speculative local tries.
	Nice int
}

// NewLocal returns an executor that runs each action as a process on this
// machine, without a shell. Actions whose inputs live under other names than
// the command uses (Action.Mapped) run in a private directory of links laid
// out by Action.Layout; all others run in place in their working directory.
func NewLocal(opts LocalOptions) Executor {
	if opts.Runner == nil {
		opts.Runner = proc.Exec{}
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

func (l *local) Execute(ctx context.Context, j Job) (*Result, error) {
	a, out := j.Action, j.Out
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
	// A compiler may write its output in place (a wrapper's `> out`; clang
	// when it cannot create a temporary file beside it): never into a file
	// an earlier attempt left there, which may be a hard link into the cache.
	for _, o := range out {
		os.Remove(o)
	}

	if l.opts.Limiter != nil {
		release, err := acquire(ctx, l.opts.Limiter, j)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	j.Notify().Begun()
	pr, err := l.opts.Runner.Run(ctx, &proc.Cmd{Argv: argv, Dir: dir, Env: l.opts.Env, Nice: l.opts.Nice})
	var res *Result
	if pr != nil {
		res = &Result{Provenance: Provenance{Where: Local, By: pr.By, NotWorker: pr.NotWorker}, Exit: pr.Exit,
			Stdout: pr.Stdout, Stderr: pr.Stderr, CPU: pr.CPU, Wall: pr.Wall, MaxRSS: pr.MaxRSS}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil {
		return res, fmt.Errorf("%s: the compiler: %w", a.ID, err)
	}
	return res, nil
}

// Describe names a local executor, with what sets it apart: a slot
// granted above it (its Limiter's name), a lower priority (Nice).
func (l *local) Describe() describe.Node {
	n := describe.Node{Name: "Local"}
	if s, ok := l.opts.Limiter.(fmt.Stringer); ok {
		n.Notes = append(n.Notes, s.String())
	}
	if l.opts.Nice != 0 {
		n.Notes = append(n.Notes, fmt.Sprintf("nice %d", l.opts.Nice))
	}
	return n
}

func (l *local) String() string { return describe.Line(l) }

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
