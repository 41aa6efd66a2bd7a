package dispatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// The fakes of a race's sides, as executor's race tests have them.

// sideFake is one side of a race: it writes content to out[0] and returns,
// after hold is closed when hold is set. It records what it was asked to
// write and whether it was cancelled. With err set it fails, after writing
// out[0] all the same if dirty is set (a side that failed half-way).
type sideFake struct {
	where     executor.Where
	content   []byte
	hold      chan struct{}
	err       error
	dirty     bool
	started   chan struct{} // closed when Execute begins
	startOnce sync.Once
	mu        sync.Mutex
	wrote     []string
	cancelled atomic.Int64
	stopped   atomic.Bool // Execute has returned
}

func newSide(where executor.Where, content string) *sideFake {
	return &sideFake{where: where, content: []byte(content), started: make(chan struct{})}
}

func (f *sideFake) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	out := j.Out
	defer f.stopped.Store(true)
	f.startOnce.Do(func() { close(f.started) })
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			f.cancelled.Add(1)
			return nil, ctx.Err()
		}
	}
	if f.err != nil && !f.dirty {
		return &executor.Result{Provenance: executor.Provenance{Where: f.where}, Exit: proc.Exit{ExitCode: 1}}, f.err
	}
	f.mu.Lock()
	f.wrote = append(f.wrote, out...)
	f.mu.Unlock()
	if err := os.WriteFile(out[0], f.content, 0o644); err != nil {
		return nil, err
	}
	if f.err != nil {
		return &executor.Result{Provenance: executor.Provenance{Where: f.where}, Exit: proc.Exit{ExitCode: 1}}, f.err
	}
	return &executor.Result{Provenance: executor.Provenance{Where: f.where}}, nil
}

func raceOut(t *testing.T) []string {
	return []string{filepath.Join(t.TempDir(), "m.o")}
}

// checkOutputs: out holds want and nothing else is left in its directory
// (neither side's private outputs), and no side but the primary (the first
// of sides) wrote the caller's path.
func checkOutputs(t *testing.T, out []string, want string, sides ...*sideFake) {
	t.Helper()
	got, err := os.ReadFile(out[0])
	if err != nil || string(got) != want {
		t.Errorf("output %q (%v), want %q", got, err, want)
	}
	ents, _ := os.ReadDir(filepath.Dir(out[0]))
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in the staging directory: %v", names)
	}
	var all []string
	for _, s := range sides {
		for _, p := range s.wrote {
			if p == out[0] && s != sides[0] {
				t.Errorf("the secondary wrote the caller's output path itself")
			}
			if slices.Contains(all, p) {
				t.Errorf("both sides wrote %s", p)
			}
			all = append(all, p)
		}
	}
}

// fixedStage is a race's remote side's progress at fixed marks (zero: not
// yet).
type fixedStage struct{ queued, executing time.Time }

func (s fixedStage) Progress() (queued, executing time.Time) { return s.queued, s.executing }

// estimates are a test's schedule.Estimates, made with its actions.
type estimates struct {
	w map[*action.Action]int64
	e map[*action.Action]time.Duration
}

func newEstimates() *estimates {
	return &estimates{w: map[*action.Action]int64{}, e: map[*action.Action]time.Duration{}}
}

// weighing returns a, of weight w.
func (s *estimates) weighing(a *action.Action, w int64) *action.Action { s.w[a] = w; return a }

// expecting returns a, expected to take d.
func (s *estimates) expecting(a *action.Action, d time.Duration) *action.Action { s.e[a] = d; return a }

func (s *estimates) of() *schedule.Estimates { return schedule.NewEstimates(s.w, s.e) }
