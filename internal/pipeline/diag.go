package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/observe/failed"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// Diagnostic is an error or warning of a run, for Env.Diag.
type Diagnostic struct {
	Warning bool
	// Module is the module it concerns (an action's ID), or "" for the run
	// as a whole. Msg names the module too, so it reads on its own.
	Module string
	// Msg is the text, without a "thindist: error:" prefix.
	Msg string
}

// diag reports a warning or an error through env.Diag, or prints it.
func diag(env Env, console *report.Console, d Diagnostic) {
	if env.Diag != nil {
		env.Diag(d)
		return
	}
	kind := "error"
	if d.Warning {
		kind = "warning"
	}
	console.Printf("thindist: %s: %s", kind, d.Msg)
}

// Reported wraps an error that RunWith has already printed.
type Reported struct{ Err error }

func (r *Reported) Error() string { return r.Err.Error() }

func (r *Reported) Unwrap() error { return r.Err }

// reportFailure shows why the run failed: on the console, or through
// env.Diag one diagnostic per failed module, so the linker shows each.
func reportFailure(env Env, console *report.Console, runErr error) {
	switch {
	case errors.Is(runErr, context.Canceled):
		if env.Diag != nil {
			env.Diag(Diagnostic{Msg: "interrupted; stopped every backend and removed temporary files"})
		} else {
			console.Printf("thindist: interrupted; stopped every backend and removed temporary files")
		}
	case env.Diag != nil:
		for _, e := range split(runErr) {
			var mi *schedule.MissingInputs
			if errors.As(e, &mi) {
				for _, m := range mi.Missing {
					env.Diag(Diagnostic{Module: m.Action.ID, Msg: m.Msg +
						" (nothing was compiled: a missing import makes clang write an empty object)"})
				}
				continue
			}
			d := Diagnostic{Msg: e.Error()}
			var be *executor.BackendError
			if errors.As(e, &be) {
				d.Module = be.Action.ID
			}
			env.Diag(d)
		}
	default:
		console.Printf("thindist: error: %s", errorText(runErr))
	}
}

// warnings passes on what a successful compiler printed (its warnings), as
// an in-process link would.
type warnings struct {
	env Env
	c   *report.Console
}

func (warnings) Planned(int, *schedule.Estimates) {}

func (warnings) Started(*action.Action, int) {}

func (w warnings) Finished(a *action.Action, _ int, res *executor.Result, err error) {
	if err != nil || res == nil || len(res.Stderr) == 0 {
		return
	}
	head := a.ID
	if res.Replayed != "" {
		head += fmt.Sprintf(" (replayed from the cache: printed by %s; the files it names are that compile's)", res.Replayed)
	}
	if w.env.Diag != nil {
		w.env.Diag(Diagnostic{Warning: true, Module: a.ID,
			Msg: fmt.Sprintf("%s:\n%s", head, strings.TrimRight(string(res.Stderr), "\n"))})
		return
	}
	w.c.Printf("thindist: %s:\n%s", head, fmt.Sprint(string(res.Stderr)))
}

// keepFailed keeps the inputs of each backend that failed, for running it
// again by hand (failed.Keep; the error names the directory), or after a
// good link removes the output's kept jobs and old ones (failed.Clean).
func keepFailed(cacheDir, output string, actions []*action.Action, runErr error) {
	if len(actions) == 0 {
		return
	}
	linkDir := failed.Dir(cacheDir, output, actions[0].Dir)
	if runErr == nil {
		failed.Clean(cacheDir, linkDir, time.Now())
		return
	}
	for n, e := range split(runErr) {
		var be *executor.BackendError
		if errors.As(e, &be) && be.Action != nil {
			be.Kept, _ = failed.Keep(linkDir, n, be.Action, ranWith(be))
		}
	}
}

// ranWith is the compiler that ran be's command if not its action's own
// (a remote worker's), else "".
func ranWith(be *executor.BackendError) string {
	if be.Result == nil || len(be.Result.Ran) == 0 {
		return ""
	}
	return be.Result.Ran[0]
}

// errorText is the text of a run's errors, one per failed action. An
// error of several lines that repeats one already shown for another action
// (the same remote failure for every action) shows only its first line.
func errorText(err error) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range split(err) {
		msg := e.Error()
		nl := strings.IndexByte(msg, '\n')
		if nl < 0 {
			out = append(out, msg)
			continue
		}
		key := msg
		if i := strings.Index(msg, ": "); i >= 0 && i < nl {
			key = msg[i+2:] // without the action's ID
		}
		if seen[key] {
			msg = msg[:nl] + " (details as above)"
		}
		seen[key] = true
		out = append(out, msg)
	}
	return strings.Join(out, "\n")
}

// split undoes errors.Join.
func split(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []error{err}
}
