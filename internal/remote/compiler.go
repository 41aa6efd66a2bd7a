package remote

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
)

// WorkersCompiler runs compiler --version on a worker and returns the
// first line it printed. It is an error when that fails or, localVer set,
// when the worker's compiler reports another version than the local one
// (local, which printed localVer first): a ThinLTO backend needs the
// version of LLVM that wrote the bitcode, and one of another version
// fails on it or compiles it otherwise. `thindist doctor` and a link
// with --remote-compiler ask it.
func (e *Executor) WorkersCompiler(ctx context.Context, compiler, local, localVer string) (string, error) {
	res, err := e.RunCommand(ctx, []string{compiler, "--version"})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s --version exited %d on the worker: %s", compiler, res.ExitCode,
			strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return "", err
	}
	remoteVer := FirstLine(string(res.Stdout))
	if localVer != "" && remoteVer != localVer {
		err = fmt.Errorf("the workers' %s reports %q, the local %s %q: DTLTO needs the same version (set --remote-compiler or the platform's container image)",
			compiler, remoteVer, local, localVer)
	}
	return remoteVer, err
}

// FirstLine is the first line of what a tool printed, without spaces
// around it: its --version's name and number.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// compilerCheckWait bounds how long a link's end waits for the check of
// the workers' compiler.
const compilerCheckWait = 2 * time.Second

// CompilerCheck asks the workers' compiler (--remote-compiler) and the
// link's own for their versions, as `thindist doctor` does
// (Executor.WorkersCompiler), in the background from when the first
// action is sent for execution (Start, as ExecOptions.OnFirst: a link
// whose every action is cached asks nothing), and warns once, as soon as
// it knows, if they differ or the workers' cannot be asked: every backend
// the workers compile then fails, and fails the link (executor.Final), or
// compiles otherwise.
type CompilerCheck struct {
	ctx      context.Context
	compiler string
	warn     func(string, ...any)
	started  sync.Once
	done     chan struct{}
	cancel   context.CancelFunc
}

// NewCompilerCheck returns the check of the workers' compiler, named
// compiler, warning with warn; ctx bounds it.
func NewCompilerCheck(ctx context.Context, compiler string, warn func(string, ...any)) *CompilerCheck {
	ctx, cancel := context.WithCancel(ctx)
	return &CompilerCheck{ctx: ctx, cancel: cancel, compiler: compiler, warn: warn, done: make(chan struct{})}
}

// Start begins the check on rex with a, the first action sent for
// execution, whose compiler is the link's.
func (c *CompilerCheck) Start(rex *Executor, a *action.Action) {
	c.started.Do(func() {
		go func() {
			defer close(c.done)
			local, localVer := a.Args[0].Text, ""
			if res, err := (proc.Exec{}).Run(c.ctx, &proc.Cmd{Argv: []string{local, "--version"}}); err == nil && !res.Failed() {
				localVer = FirstLine(string(res.Stdout))
			}
			if _, err := rex.WorkersCompiler(c.ctx, c.compiler, local, localVer); err != nil && c.ctx.Err() == nil {
				c.warn("--remote-compiler: %v; the link fails where the workers' compiler does (`thindist doctor` checks this)", err)
			}
		}()
	})
}

// Wait waits for the check, if it began, at most compilerCheckWait, so
// that its warning comes before the link's errors, then ends it.
func (c *CompilerCheck) Wait() {
	started := true
	c.started.Do(func() { started = false })
	if started {
		t := time.NewTimer(compilerCheckWait)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
		}
	}
	c.cancel()
	if started {
		<-c.done
	}
}
