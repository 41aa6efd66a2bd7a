package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
)

// Spare hands out spare capacity for second tries: a Race asks for a slot
// for a as soon as its primary starts, and runs its secondary once
// granted. The Hybrid's Dispatcher is one (dispatch.Dispatcher.Wait).
type Spare interface {
	// Wait blocks until a slot is granted for a or ctx ends; release
	// gives the slot back. primary is the primary's progress, as its
	// remote executor marks it (a Stage), read as the spare chooses.
	Wait(ctx context.Context, a *action.Action, primary Progress) (release func(), err error)
}

// Progress is how far a remote execution has got: when the action was
// sent for execution, and when a worker took it; zero times for what has
// not happened. Stage is one.
type Progress interface {
	Progress() (queued, executing time.Time)
}

// Race runs each action with primary and, once spare grants a slot, with
// secondary as well (as Bazel's dynamic execution does: a slow or stalled
// remote action is caught up by a local one). The first side to succeed
// wins and the other is cancelled: a remote side's Execute stream ends,
// a local side's process group is killed. The primary writes its outputs
// to the caller's out paths (private to the caller until it renames them:
// most actions never race, and another name would cost each output a
// rename), the secondary to a private name beside them; the secondary's
// are renamed over the primary's only if it wins, once the primary has
// stopped, so the two never write the same path and exactly one result is
// used. A side's own failure (Final) ends the race; any other failure
// leaves it to the other side if that has started. Both sides should be
// Verified: a result wins only when it may be linked.
func Race(primary, secondary Executor, spare Spare) Executor {
	return &race{primary: primary, secondary: secondary, spare: spare, suffix: ".secondary"}
}

type race struct {
	primary, secondary Executor
	spare              Spare
	// suffix names the secondary's private outputs (out[i] + suffix):
	// distinct for races nested in one another.
	suffix string
	// hedge marks the results of a Hedge.
	hedge bool

	seconds   atomic.Int64 // secondaries started
	secondWon atomic.Int64 // ... whose result was used
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (r *race) Describe() describe.Node { return node("Race", r.primary, r.secondary) }

func (r *race) String() string { return describe.Line(r) }

type side struct {
	ex   Executor
	out  []string
	stop context.CancelFunc
	res  *Result
	err  error
	done bool
}

type sideResult struct {
	s   *side
	res *Result
	err error
}

func (r *race) Execute(ctx context.Context, j Job) (*Result, error) {
	out := j.Out
	results := make(chan sideResult, 2)
	// The primary's progress, for the spare to choose what to race; it
	// passes every event on to the job's Events (a nested race's, a
	// Hedge's, to its outer race's Stage).
	stage := NewStage(j.Events)
	j.Events = stage
	start := func(ex Executor, suffix string) *side {
		sctx, stop := context.WithCancel(ctx)
		sj := j
		s := &side{ex: ex, stop: stop, out: out}
		if suffix != "" {
			// A speculative try: the action has begun when its
			// primary has (a head start lasts until the remote
			// side's inputs are up).
			sj.Events = secondTry{stage}
			s.out = make([]string, len(out))
			for i, o := range out {
				s.out[i] = o + suffix
			}
			sj.Out = s.out
		}
		go func() {
			res, err := ex.Execute(sctx, sj)
			results <- sideResult{s, res, err}
		}()
		return s
	}
	p := start(r.primary, "")
	won := false
	defer func() {
		if !won {
			removeAll(out) // what the primary left, if anything
		}
	}()

	// Ask for a spare slot while the primary runs.
	granted, stopWaiting := r.askSpare(ctx, j.Action, stage)
	defer stopWaiting()

	var s *side // the secondary, once started
	running := 1
	for {
		select {
		case release := <-granted:
			defer release()
			s = start(r.secondary, r.suffix)
			defer removeAll(s.out)
			r.seconds.Add(1)
			running++
			continue
		case sr := <-results:
			running--
			sr.s.res, sr.s.err, sr.s.done = sr.res, sr.err, true
		}
		switch {
		case ctx.Err() != nil: // the request for a spare slot has ended too
			r.drain(results, running)
			return p.res, ctx.Err()
		case p.done && p.err == nil:
			res, err := r.finish(p, s, results, running, out, s != nil, false)
			won = err == nil
			return res, err
		case s != nil && s.done && s.err == nil:
			res, err := r.finish(s, p, results, running, out, true, true)
			won = err == nil
			return res, err
		case p.done && (Final(p.err) || s == nil || s.done):
			// The primary failed for good, or there is no one left to
			// win: its error stands (a Fallback around the race may still
			// try elsewhere).
			return r.lose(p, s, results, running)
		case s != nil && s.done && Final(s.err):
			return r.lose(s, p, results, running)
		}
		// One side failed but the other may still win.
	}
}

// askSpare asks r's spare for a slot for a until ctx ends or stop is
// called; the slot comes on granted. stop returns once the request is
// over, giving back a grant not taken from granted (one that came too late
// to be used): no slot outlives the race.
func (r *race) askSpare(ctx context.Context, a *action.Action, primary Progress) (granted <-chan func(), stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	g := make(chan func(), 1)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if release, err := r.spare.Wait(wctx, a, primary); err == nil {
			g <- release
		}
	}()
	return g, func() {
		cancel()
		<-waited
		select {
		case release := <-g:
			release()
		default:
		}
	}
}

// finish makes w the winner (second: the secondary): it stops the other
// side, waits for it, and renames w's outputs into out.
func (r *race) finish(w, l *side, results chan sideResult, running int, out []string, raced, second bool) (*Result, error) {
	if l != nil {
		l.stop()
	}
	r.drain(results, running)
	for i, o := range out {
		if w.out[i] == o {
			continue // the primary's, already in place
		}
		if err := os.Rename(w.out[i], o); err != nil {
			return w.res, fmt.Errorf("placing the winning result: %w", err)
		}
	}
	if r.hedge {
		w.res.Hedge = outcome(raced, second)
	} else {
		w.res.Race = outcome(raced, second)
	}
	if second {
		r.secondWon.Add(1)
	}
	return w.res, nil
}

// lose ends the race with f's error once the other side has stopped.
func (r *race) lose(f, other *side, results chan sideResult, running int) (*Result, error) {
	if other != nil {
		other.stop()
	}
	r.drain(results, running)
	if f.err == nil {
		return f.res, errors.New("race: no result")
	}
	return f.res, f.err
}

// drain waits for the n sides still running.
func (r *race) drain(results chan sideResult, n int) {
	for ; n > 0; n-- {
		sr := <-results
		sr.s.res, sr.s.err, sr.s.done = sr.res, sr.err, true
	}
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// secondTry is the Events of a race's second side: a speculative try has
// begun when its primary has (a head start lasts until the remote side's
// inputs are up), so it does not report Begun; it reports the rest.
type secondTry struct{ Events }

func (secondTry) Begun() {}
