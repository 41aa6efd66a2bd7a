package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Final reports whether err is an action's own failure: the compiler ran
// to its end and failed, by exiting non-zero (a compile error) or by
// exiting 0 with an unusable object after saying why (BackendError.Said:
// clang reports a backend it could not run, or bitcode it cannot read, and
// exits 0). Another executor with the same compiler would only fail the
// same way, so it is reported as it is, as Bazel does with a remote
// action's own failure; and where the workers' compiler is not this
// machine's (--remote-compiler), compiling some of a link's actions here
// instead would link objects of two compilers: every such failure of the
// link fails it, whichever way the compiler ended. A result that is only
// unusable, with nothing said (an empty or missing object: lost on a
// worker's disk or on the way), a compiler killed by a signal (a worker or
// machine out of memory) and every failure to run at all are not final.
func Final(err error) bool {
	var be *BackendError
	return errors.As(err, &be) && be.Result != nil && be.Result.Signal == "" && (be.Result.ExitCode != 0 || be.Said)
}

// Unsupported is the error of an executor that cannot run this action at
// all (another executor may): Fallback runs it with its other executor and
// says so once per run.
type Unsupported struct{ Err error }

func (e *Unsupported) Error() string { return e.Err.Error() }
func (e *Unsupported) Unwrap() error { return e.Err }

// RunWide is implemented by errors that hold for every action of the run
// (a service that can run none of them: a tripped circuit breaker), so that
// decorators report them once rather than for every action.
type RunWide interface {
	error
	RunWide()
}

// Announced is implemented by run-wide errors whose source has already
// told the user (once) what happened and what the run does now: a
// decorator that falls back says nothing more of them.
type Announced interface {
	RunWide
	Announced()
}

// FallbackOptions configures NewFallback.
type FallbackOptions struct {
	// None fails the action when the primary fails, instead of running it
	// with the secondary.
	None bool
	// What names the primary in messages ("remote execution").
	What string
	// Hint is appended to the error when None stops a fallback.
	Hint string
	// Warn reports each fallback.
	Warn func(format string, args ...any)
}

// FallbackStats are what a Fallback did in a run.
type FallbackStats struct {
	// Fallbacks: actions the primary failed that the secondary ran.
	Fallbacks int64
	// Unsupported: actions the primary could not take at all.
	Unsupported int64
}

// Fallback runs actions with a primary executor and, when that fails for a
// reason other than the action's own (see Final), with a secondary one.
type Fallback struct {
	primary, secondary Executor
	o                  FallbackOptions
	unsupportedOnce    sync.Once
	runWideOnce        sync.Once
	fallbacks          atomic.Int64
	unsupported        atomic.Int64
}

// NewFallback returns the decorator.
func NewFallback(primary, secondary Executor, o FallbackOptions) *Fallback {
	if o.Warn == nil {
		o.Warn = func(string, ...any) {}
	}
	if o.What == "" {
		o.What = "the primary executor"
	}
	return &Fallback{primary: primary, secondary: secondary, o: o}
}

// Stats returns the counts of the run so far.
func (f *Fallback) Stats() FallbackStats {
	return FallbackStats{Fallbacks: f.fallbacks.Load(), Unsupported: f.unsupported.Load()}
}

// Execute implements Executor.
func (f *Fallback) Execute(ctx context.Context, j Job) (*Result, error) {
	a := j.Action
	res, err := f.primary.Execute(ctx, j)
	if err == nil || ctx.Err() != nil || Final(err) {
		return res, err
	}
	var un *Unsupported
	if errors.As(err, &un) {
		f.unsupported.Add(1)
		f.unsupportedOnce.Do(func() {
			f.o.Warn("%s and other actions run on this machine, not by %s: %v", a.ID, f.o.What, un)
		})
		return f.secondary.Execute(ctx, j)
	}
	if f.o.None {
		if f.o.Hint != "" {
			err = fmt.Errorf("%w\n  (%s)", err, f.o.Hint)
		}
		return res, err
	}
	f.fallbacks.Add(1)
	var rw RunWide
	var told Announced
	switch {
	case errors.As(err, &told): // said once by its source
	case errors.As(err, &rw):
		f.runWideOnce.Do(func() {
			f.o.Warn("%s: %s failed, compiling it and the remaining actions locally: %v", a.ID, f.o.What, rw)
		})
	default:
		f.o.Warn("%s: %s failed, compiling locally: %s", a.ID, f.o.What, summary(strings.TrimPrefix(err.Error(), a.ID+": ")))
	}
	return f.secondary.Execute(ctx, j)
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (f *Fallback) Describe() describe.Node { return node("Fallback", f.primary, f.secondary) }

func (f *Fallback) String() string { return describe.Line(f) }

// summary is the first line of a failure and its hint lines ("  (...)",
// such as "check --remote-platform"): other details, such as a
// compiler's output, are left out (" ...").
func summary(s string) string {
	lines := strings.Split(s, "\n")
	var hints []string
	dropped := false
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "  ("):
			hints = append(hints, l)
		case strings.TrimSpace(l) != "":
			dropped = true
		}
	}
	out := lines[0]
	if dropped {
		out += " ..."
	}
	for _, h := range hints {
		out += "\n" + h
	}
	return out
}
