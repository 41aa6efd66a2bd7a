package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Exec is the Runner that starts each command with os/exec (fork and
// execve). The zero Exec is ready to use.
type Exec struct {
	// Grace is how long a cancelled process group has between SIGTERM
	// and SIGKILL; 0 means DefaultGrace.
	Grace time.Duration
}

// Describe names the runner at the end of a chain (describe.Describer).
func (Exec) Describe() describe.Node { return describe.Node{Name: "Exec"} }

// Run runs c; see Runner.
func (e Exec) Run(ctx context.Context, c *Cmd) (*Result, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("proc: empty command")
	}
	grace := e.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = c.Dir, c.Env, c.ExtraFiles
	var stdout, stderr Capture
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	// Cancellation signals the whole group: a compiler wrapper (a shell
	// script, ccache, distcc) does not pass SIGTERM on to the compiler it
	// runs, which would otherwise survive thindist, keep running, and hold
	// the output pipes open. Whatever of the group still runs after the
	// grace period (os/exec then kills the leader and closes the pipes) is
	// killed below.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = grace
	start := time.Now()
	// SIGTERM on thindist's death, as on cancellation: clang and lld
	// remove their temporary files, ccache passes it on to its compiler.
	p, err := Start(cmd, syscall.SIGTERM)
	if err == nil {
		if c.Nice > 0 {
			// Best effort, and before the compiler has done much: what
			// it starts inherits the priority. Relative to this process's
			// own (getpriority(2) answers 20 - nice), so that a build run
			// under nice(1) gets its speculative compiles lower still.
			if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
				syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, min(20-p+c.Nice, 19))
			}
		}
		err = p.Wait()
		if ctx.Err() != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	res := &Result{Wall: time.Since(start), Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), By: ByExec}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSS = ownMaxRSS(ru.Maxrss)
		}
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s stopped: %w", c.Argv[0], ctx.Err())
	}
	var exitErr *exec.ExitError
	// ErrWaitDelay: the process ended, but something it started kept its
	// output open; what that wrote later is lost, the result stands.
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("cannot run %q: %w", c.Argv[0], err)
	}
	return res, nil
}

// ownMaxRSS returns a child's peak resident set size in bytes from its
// rusage (KiB on Linux), or 0 when it may be thindist's. os/exec starts
// children with vfork, and Linux carries the high-water mark of the memory
// a process leaves at exec into the new program's: a child's ru_maxrss is
// max(thindist's RSS at the exec, the program's own peak). Above thindist's
// own peak it can only be the program's; at or below, it is unknown.
func ownMaxRSS(kib int64) int64 {
	var self syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || kib <= self.Maxrss {
		return 0
	}
	return kib << 10
}
