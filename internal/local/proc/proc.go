// Package proc holds the one process interface, Runner, and its plain
// implementation, Exec, that every chain of runners ends in (forkserver,
// worker and workerserver put theirs in front of it).
//
// It runs the processes thindist starts, compilers and linkers, so that
// none outlives thindist or an interrupt: each leads a process group of
// its own, dies with thindist (the kernel's parent-death signal),
// and is stopped on cancellation with SIGTERM to its whole group (which lets
// clang and lld remove their temporary files, and reaches what a wrapper
// script started), then SIGKILL after a grace period. Its output is captured
// up to a limit, and its resource usage reported.
//
// Exec runs a command with os/exec. Runners are composed as a chain of
// decorators, which Describe prints.
package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Cmd is one process to run, without a shell.
type Cmd struct {
	Argv []string
	Dir  string // "" means this process's working directory
	// Env is the environment; nil means this process's.
	Env []string
	// Stdout, if not nil, receives the standard output as it comes (a
	// linker's map printed to the user's terminal); otherwise it is
	// captured into Result.Stdout. The standard error is always captured.
	Stdout io.Writer
	// Nice, if above 0, lowers the process's priority by that much (as
	// nice(1)): a speculative run, such as a race's second try, should
	// take only CPU the work that counts leaves idle.
	Nice int
	// ExtraFiles become the process's descriptors 3, 4, ... (os/exec's
	// ExtraFiles); what it starts inherits them too.
	ExtraFiles []*os.File
}

// Exit is how a command ended: its exit code, or the signal that killed
// it. A process run here ends so (Result), and so does a backend action
// wherever it ran (executor.Result).
type Exit struct {
	ExitCode int    // -1 when killed by a signal
	Signal   string // the signal that killed it, if any
}

// Failed reports whether the command did not exit 0.
func (e Exit) Failed() bool { return e.ExitCode != 0 || e.Signal != "" }

// Status describes how the command ended, for messages.
func (e Exit) Status() string {
	if e.Signal != "" {
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.ExitCode)
}

// Result is how a process ended.
type Result struct {
	Exit
	// Stdout and Stderr hold the first CaptureLimit bytes of each stream.
	Stdout, Stderr []byte
	CPU            time.Duration // user + system time
	// MaxRSS is the peak resident set size in bytes, 0 when unknown: an
	// exec'd process's peak is known only when above thindist's own (see
	// ownMaxRSS); a forked one's counts the pages it inherited from its
	// server's memory and those it touched itself (see forkserver).
	MaxRSS int64
	Wall   time.Duration
	// By is the kind of runner that ran it: set by that runner, whatever
	// runners it went through on its way there.
	By RunBy
	// NotWorker, when a worker runner was asked and passed the job on to
	// another runner, says why: set by that worker runner alone.
	NotWorker string
}

// RunBy is the kind of runner that ran a process (Result.By): a value
// each runner sets on its own results, so that what is above the runners
// learns how a process ran without knowing the runners.
type RunBy uint8

const (
	// ByNone: no runner here ran it (the zero value: a remote or cached
	// result).
	ByNone RunBy = iota
	// ByExec: started with fork and execve (Exec).
	ByExec
	// ByForkServer: forked from a fork server, this process's or a
	// worker server's (internal/local/forkserver, workerserver).
	ByForkServer
	// ByWorker: compiled in-process by a thindist-worker; no process of
	// its own was started (internal/local/worker).
	ByWorker
)

func (b RunBy) String() string {
	switch b {
	case ByExec:
		return "exec"
	case ByForkServer:
		return "fork server"
	case ByWorker:
		return "worker"
	}
	return "none"
}

// Runner runs a command to its end.
//
// A nil error means the process ran and ended; Result says how. An error
// means it could not be run, or ctx ended while it ran: then the process
// group has been stopped, the error wraps ctx's error (errors.Is(err,
// context.Canceled) holds), and Result, when not nil, holds what the
// process printed before it was stopped.
type Runner interface {
	Run(ctx context.Context, c *Cmd) (*Result, error)
}

// Describe writes the runner chain r as a tree (describe.Tree), one
// runner a line, each indented two spaces under the one that wraps it.
// Every runner of this module is a describe.Describer: its name and the
// runners it hands jobs to, as values. docs/architecture.md shows the
// chain of each mode so.
func Describe(r Runner) string { return describe.Tree(r) }

// DefaultGrace is how long a cancelled process has between SIGTERM and
// SIGKILL when a runner does not say.
const DefaultGrace = 5 * time.Second
