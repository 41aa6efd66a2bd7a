package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
)

// sideFake is one side of a race: it writes content to out[0] and returns,
// after hold is closed when hold is set. It records what it was asked to
// write and whether it was cancelled. With err set it fails, after writing
// out[0] all the same if dirty is set (a side that failed half-way).
type sideFake struct {
	where     Where
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

func newSide(where Where, content string) *sideFake {
	return &sideFake{where: where, content: []byte(content), started: make(chan struct{})}
}

func (f *sideFake) Execute(ctx context.Context, j Job) (*Result, error) {
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
		return &Result{Provenance: Provenance{Where: f.where}, Exit: proc.Exit{ExitCode: 1}}, f.err
	}
	f.mu.Lock()
	f.wrote = append(f.wrote, out...)
	f.mu.Unlock()
	if err := os.WriteFile(out[0], f.content, 0o644); err != nil {
		return nil, err
	}
	if f.err != nil {
		return &Result{Provenance: Provenance{Where: f.where}, Exit: proc.Exit{ExitCode: 1}}, f.err
	}
	return &Result{Provenance: Provenance{Where: f.where}}, nil
}

// spareAt grants a slot when its channel is closed (nil: never).
type spareAt struct {
	at       chan struct{}
	granted  atomic.Int64
	released atomic.Int64
}

func (s *spareAt) Wait(ctx context.Context, _ *action.Action, _ Progress) (func(), error) {
	select {
	case <-s.at:
		s.granted.Add(1)
		return func() { s.released.Add(1) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

var raceAction = &action.Action{ID: "m.o"}

// TestRaceLocalWins: a stalled remote side is caught up by the local one
// once a slot is spare; the remote side is cancelled and has stopped when
// the race returns; the local result is the one used.
func TestRaceLocalWins(t *testing.T) {
	remote, local := newSide(Remote, "remote"), newSide(Local, "local")
	remote.hold = make(chan struct{}) // stalls
	spare := grantedSpare()
	out := raceOut(t)
	res, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Where != Local || res.Race != SecondWon {
		t.Errorf("result %+v, want the local side's, marked raced and won by the second", res)
	}
	if remote.cancelled.Load() != 1 || !remote.stopped.Load() {
		t.Errorf("the remote side was not cancelled and waited for (cancelled %d)", remote.cancelled.Load())
	}
	if spare.released.Load() != 1 {
		t.Errorf("the spare slot was not given back")
	}
	checkOutputs(t, out, "local", remote, local)
}

// TestRacePrimaryWinsAlone: without a spare slot the primary runs alone;
// its result is used and marked as not raced.
func TestRacePrimaryWinsAlone(t *testing.T) {
	remote, local := newSide(Remote, "remote"), newSide(Local, "local")
	out := raceOut(t)
	res, err := Race(remote, local, &spareAt{}).Execute(t.Context(), Job{Action: raceAction, Out: out})
	if err != nil || res.Where != Remote || res.Race != Once {
		t.Fatalf("%v %+v", err, res)
	}
	select {
	case <-local.started:
		t.Errorf("the secondary ran without a spare slot")
	default:
	}
	checkOutputs(t, out, "remote", remote, local)
}

// lateSpare grants a slot only once the race has stopped asking for one
// (its context ended): a grant that came as the race ended, which a
// Dispatcher's Wait may return.
type lateSpare struct{ granted, released atomic.Int64 }

func (s *lateSpare) Wait(ctx context.Context, _ *action.Action, _ Progress) (func(), error) {
	<-ctx.Done()
	s.granted.Add(1)
	return func() { s.released.Add(1) }, nil
}

// TestRaceGivesBackLateGrant: a spare slot granted as the race ended,
// too late to be used, is given back by the time the race returns.
func TestRaceGivesBackLateGrant(t *testing.T) {
	spare := &lateSpare{}
	for i := range 20 {
		remote, local := newSide(Remote, "remote"), newSide(Local, "local")
		if _, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: raceOut(t)}); err != nil {
			t.Fatal(err)
		}
		if g, r := spare.granted.Load(), spare.released.Load(); g != int64(i+1) || r != g {
			t.Fatalf("race %d returned with %d slots granted and %d given back", i+1, g, r)
		}
	}
}

// TestRaceRemoteWins: the remote side finishes while the local one runs;
// the local side is cancelled (its process group would be killed).
func TestRaceRemoteWins(t *testing.T) {
	remote, local := newSide(Remote, "remote"), newSide(Local, "local")
	remote.hold, local.hold = make(chan struct{}), make(chan struct{})
	spare := grantedSpare()
	go func() {
		<-local.started
		close(remote.hold)
	}()
	out := raceOut(t)
	res, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: out})
	if err != nil || res.Where != Remote || res.Race != FirstWon {
		t.Fatalf("%v %+v", err, res)
	}
	if local.cancelled.Load() != 1 || !local.stopped.Load() {
		t.Errorf("the local side was not cancelled and waited for")
	}
	checkOutputs(t, out, "remote", remote, local)
}

// TestRaceFailures: a compile error on either side ends the race with it
// at once; a failure that is not the action's own (the remote side could
// not run it) leaves the race to the other side.
func TestRaceFailures(t *testing.T) {
	compileError := &BackendError{Action: raceAction, Reason: "exit status 1", Result: &Result{Provenance: Provenance{Where: Remote}, Exit: proc.Exit{ExitCode: 1}}}
	t.Run("remote-compile-error", func(t *testing.T) {
		remote, local := newSide(Remote, "remote"), newSide(Local, "local")
		local.hold = make(chan struct{})
		remote.hold = make(chan struct{})
		remote.err = compileError
		spare := grantedSpare()
		go func() { <-local.started; close(remote.hold) }()
		_, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: raceOut(t)})
		if err != compileError || local.cancelled.Load() != 1 {
			t.Errorf("%v; local cancelled %d times", err, local.cancelled.Load())
		}
	})
	t.Run("remote-unavailable", func(t *testing.T) { localWinsAfterRemoteFails(t, false) })
	t.Run("remote-unavailable-alone", func(t *testing.T) {
		remote, local := newSide(Remote, "remote"), newSide(Local, "local")
		remote.err = errors.New("Unavailable")
		spare := &spareAt{at: make(chan struct{})} // never granted
		_, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: raceOut(t)})
		if err != remote.err {
			t.Errorf("%v, want the remote error for a Fallback to handle", err)
		}
	})
}

// TestRaceCancel: cancelling the caller stops both sides.
func TestRaceCancel(t *testing.T) {
	remote, local := newSide(Remote, "remote"), newSide(Local, "local")
	remote.hold, local.hold = make(chan struct{}), make(chan struct{})
	spare := grantedSpare()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-local.started; cancel() }()
	_, err := Race(remote, local, spare).Execute(ctx, Job{Action: raceAction, Out: raceOut(t)})
	if !errors.Is(err, context.Canceled) || remote.cancelled.Load() != 1 || local.cancelled.Load() != 1 {
		t.Errorf("%v; cancelled remote %d local %d", err, remote.cancelled.Load(), local.cancelled.Load())
	}
}

// TestRaceDirtyPrimary: a primary that failed after writing the caller's
// output path (not the action's own failure) loses to the secondary, whose
// output replaces what it left; when no side wins, nothing is left there.
func TestRaceDirtyPrimary(t *testing.T) {
	t.Run("secondary-wins", func(t *testing.T) { localWinsAfterRemoteFails(t, true) })
	t.Run("no-winner", func(t *testing.T) {
		remote, local := newSide(Remote, "half"), newSide(Local, "local")
		remote.err, remote.dirty = errors.New("Unavailable"), true
		out := raceOut(t)
		if _, err := Race(remote, local, &spareAt{}).Execute(t.Context(), Job{Action: raceAction, Out: out}); err != remote.err {
			t.Fatalf("%v, want the primary's error", err)
		}
		if len(remote.wrote) == 0 {
			t.Fatal("the primary wrote nothing: the test tests nothing")
		}
		if _, err := os.Stat(out[0]); !os.IsNotExist(err) {
			t.Errorf("the failed primary's output is left at the caller's path (%v)", err)
		}
	})
}

// localWinsAfterRemoteFails: the remote side fails (Unavailable, after
// writing half an output when dirty) while the local one runs; the local
// one then wins and its output is the one left.
func localWinsAfterRemoteFails(t *testing.T, dirty bool) {
	remote, local := newSide(Remote, "half"), newSide(Local, "local")
	remote.err, remote.dirty = errors.New("Unavailable"), dirty
	remote.hold, local.hold = make(chan struct{}), make(chan struct{})
	spare := grantedSpare()
	go func() {
		<-local.started
		close(remote.hold)
		for !remote.stopped.Load() {
			time.Sleep(time.Millisecond)
		}
		close(local.hold)
	}()
	out := raceOut(t)
	res, err := Race(remote, local, spare).Execute(t.Context(), Job{Action: raceAction, Out: out})
	if err != nil || res.Where != Local {
		t.Fatalf("%v %+v", err, res)
	}
	checkOutputs(t, out, "local", remote, local)
}

// grantedSpare grants a slot at once.
func grantedSpare() *spareAt {
	s := &spareAt{at: make(chan struct{})}
	close(s.at)
	return s
}
