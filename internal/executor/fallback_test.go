package executor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
)

// counting is a fake executor that counts its calls and returns what f
// says.
type counting struct {
	calls atomic.Int64
	f     func(ctx context.Context, j Job) (*Result, error)
}

func (c *counting) Execute(ctx context.Context, j Job) (*Result, error) {
	c.calls.Add(1)
	return c.f(ctx, j)
}

func returning(res *Result, err error) *counting {
	return &counting{f: func(context.Context, Job) (*Result, error) { return res, err }}
}

func collectWarnings(w *[]string) func(string, ...any) {
	return func(format string, args ...any) { *w = append(*w, fmt.Sprintf(format, args...)) }
}

// TestFallbackWarningKeepsHint: the per-action warning of a fallback keeps
// the failure's hint lines and drops other details.
func TestFallbackWarningKeepsHint(t *testing.T) {
	failing := returning(nil, errors.New("remote execution failed: boom\ncompiler output\n  (check --remote-platform)"))
	local := returning(&Result{Provenance: Provenance{Where: Local}}, nil)
	var warnings []string
	f := NewFallback(failing, local, FallbackOptions{What: "remote execution", Warn: collectWarnings(&warnings)})
	if _, err := f.Execute(t.Context(), Job{Action: &action.Action{ID: "a.o"}, Out: nil}); err != nil {
		t.Fatal(err)
	}
	want := "a.o: remote execution failed, compiling locally: remote execution failed: boom ...\n  (check --remote-platform)"
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	if st := f.Stats(); st.Fallbacks != 1 || local.calls.Load() != 1 {
		t.Errorf("stats %+v, %d local calls; want one fallback", st, local.calls.Load())
	}
}

// TestFallbackFinal: a command that ran on the primary and exited non-zero
// (a compile error) is the action's own failure: it is returned as it is,
// with the compiler's stderr, and the secondary never runs. A result that
// is only unusable (an empty object) still falls back.
func TestFallbackFinal(t *testing.T) {
	a := &action.Action{ID: "bad.o", Dir: "/src"}
	compileError := &BackendError{Action: a, Reason: "exit status 1",
		Result: &Result{Provenance: Provenance{Where: Remote}, Exit: proc.Exit{ExitCode: 1}, Stderr: []byte("bad.c:1: error: expected ';'")}}
	emptyObject := &BackendError{Action: a, Reason: "the compiler exited 0 but wrote an empty object file (0 bytes)",
		Result: &Result{Provenance: Provenance{Where: Remote}}}
	// clang 19 on LLVM 22 bitcode (issue 48, item 3): exit 0, an error on
	// stderr, no object bytes. Its own failure, as an exit status is.
	said := check(a, &Result{Provenance: Provenance{Where: Remote}, Stderr: []byte("Error loading index file 'm.o.thinlto.bc': Invalid summary version 12")},
		filepath.Join(t.TempDir(), "none.o"), true)
	killed := &BackendError{Action: a, Reason: "killed", Result: &Result{Exit: proc.Exit{ExitCode: -1, Signal: "killed"}}}
	for _, tc := range []struct {
		name     string
		err      error
		fallback bool
	}{
		{"compile-error", compileError, false},
		{"wrapped-compile-error", fmt.Errorf("remote: %w", compileError), false},
		{"empty-object", emptyObject, true},
		{"empty-object-with-error", said, false},
		{"killed", killed, true},
		{"unavailable", errors.New("remote execution failed after 10 attempts: Unavailable"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := returning(&Result{Provenance: Provenance{Where: Local}}, nil)
			var warnings []string
			f := NewFallback(returning(nil, tc.err), local, FallbackOptions{What: "remote execution", Warn: collectWarnings(&warnings)})
			res, err := f.Execute(t.Context(), Job{Action: a, Out: nil})
			if got := local.calls.Load() == 1; got != tc.fallback {
				t.Fatalf("secondary ran: %v, want %v (err %v, warnings %q)", got, tc.fallback, err, warnings)
			}
			if tc.fallback {
				if err != nil || res.Where != Local || len(warnings) != 1 {
					t.Errorf("after a fallback: %v %+v, warnings %q", err, res, warnings)
				}
				return
			}
			if err != tc.err || len(warnings) != 0 {
				t.Errorf("the compile error came back as %v with warnings %q", err, warnings)
			}
			var be *BackendError
			errors.As(tc.err, &be)
			if !strings.Contains(err.Error(), string(be.Result.Stderr)) || !strings.Contains(err.Error(), "command (run in") {
				t.Errorf("the error lacks the worker's stderr or the command: %v", err)
			}
		})
	}
}

// TestFallbackNone: without a fallback the primary's error is returned
// with the hint; an action the primary cannot take at all still runs on
// the secondary, with one warning for the run.
func TestFallbackNone(t *testing.T) {
	local := returning(&Result{Provenance: Provenance{Where: Local}}, nil)
	var warnings []string
	f := NewFallback(returning(nil, errors.New("boom")), local, FallbackOptions{None: true, Hint: "no fallback", Warn: collectWarnings(&warnings)})
	_, err := f.Execute(t.Context(), Job{Action: &action.Action{ID: "a.o"}, Out: nil})
	if err == nil || err.Error() != "boom\n  (no fallback)" || local.calls.Load() != 0 {
		t.Errorf("%v, %d local calls", err, local.calls.Load())
	}
	un := NewFallback(returning(nil, &Unsupported{Err: errors.New("absolute paths")}), local, FallbackOptions{None: true, What: "remote execution", Warn: collectWarnings(&warnings)})
	for _, id := range []string{"a.o", "b.o"} {
		if _, err := un.Execute(t.Context(), Job{Action: &action.Action{ID: id}, Out: nil}); err != nil {
			t.Fatal(err)
		}
	}
	if st := un.Stats(); st.Unsupported != 2 || len(warnings) != 1 || !strings.Contains(warnings[0], "a.o and other actions run on this machine") {
		t.Errorf("stats %+v, warnings %q", st, warnings)
	}
}

// runWideErr is a failure that holds for the whole run.
type runWideErr struct{}

func (runWideErr) Error() string { return "no worker for the platform" }
func (runWideErr) RunWide()      {}

// TestFallbackRunWideOnce: a failure that holds for every action is
// reported once.
func TestFallbackRunWideOnce(t *testing.T) {
	var warnings []string
	f := NewFallback(returning(nil, runWideErr{}), returning(&Result{}, nil), FallbackOptions{What: "remote execution", Warn: collectWarnings(&warnings)})
	for _, id := range []string{"a.o", "b.o", "c.o"} {
		if _, err := f.Execute(t.Context(), Job{Action: &action.Action{ID: id}, Out: nil}); err != nil {
			t.Fatal(err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "compiling it and the remaining actions locally") {
		t.Errorf("warnings %q", warnings)
	}
	if st := f.Stats(); st.Fallbacks != 3 {
		t.Errorf("stats %+v", st)
	}
}
