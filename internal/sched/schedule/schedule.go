// Package schedule runs a set of backend actions through an executor: it
// checks their inputs up front, starts the modules expected to take longest
// (else the largest) first, keeps a bounded number in flight, stages every
// output under a temporary name and renames it into place only once the
// executor chain has accepted it, and stops starting work at the first
// failure.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
)

// Observer hears what the scheduler does, for progress lines, summaries and
// traces. Calls come from several goroutines.
type Observer interface {
	// Planned: total actions will run, with these estimates.
	Planned(total int, est *Estimates)
	Started(a *action.Action, slot int)
	Finished(a *action.Action, slot int, res *executor.Result, err error)
}

// Options configures Run.
type Options struct {
	// Parallel is how many actions are in flight at once. Local processes
	// are bounded separately by the local executor's limiter; this bound
	// also covers actions waiting on a cache or a remote cluster.
	Parallel int
	// Observer, if set, hears every start and finish.
	Observer Observer
	// Preparing, if above 0, bounds the actions preparing at once: started
	// and not yet begun (executor.Events.Begun) or ended, i.e. computing keys,
	// looking up caches, uploading inputs. They are let in in order. With
	// hundreds preparing together on this machine's few cores, each
	// finishes its preparation only as late as the last: a remote cluster
	// then idles until hundreds of actions reach it at once, instead of
	// filling as each is ready. The bound must cover the round trips of a
	// preparation (see the pipeline), or actions reach the cluster more
	// slowly than they could.
	Preparing int
	// Planner, if set, is told the actions in the order they will start,
	// before the first one does, and says which of the first get a head
	// start, in tiers (headStart: each tier waits until those before it
	// have begun, the others until all have); it is told
	// once when every action has been started (or none will be, after a
	// failure): an executor with spare capacity may then spend it on the
	// actions in flight (races).
	Planner Planner
	// Slots, if set, hears when an action waits for a local process slot
	// (executor.Events.WaitingForSlot, DoneWaiting).
	Slots SlotObserver
	// Estimates order the actions (Estimates.Precedes) and go to the
	// Planner and the Observer; nil: Run weighs the modules itself, with
	// no history.
	Estimates *Estimates
}

// Run executes every action and returns once all have finished or, after a
// failure or cancellation, once those already started have. On success each
// action's outputs are at their declared paths. On failure no output of this
// run is left behind, and the error describes every failed action.
func Run(ctx context.Context, actions []*action.Action, ex executor.Executor, opts Options) error {
	est := opts.Estimates
	if est == nil {
		est = NewEstimates(Weigh(actions), nil)
	}
	if err := preflight(actions, est); err != nil {
		return err
	}
	order := make([]*action.Action, len(actions))
	copy(order, actions)
	sort.SliceStable(order, func(i, j int) bool { return est.Precedes(order[i], order[j]) })

	st := newStaging()
	defer st.removeAll()
	obs := opts.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	obs.Planned(len(order), est)
	var tiers []int
	if opts.Planner != nil {
		tiers = opts.Planner.Plan(order, est)
	}
	gate := newHeadStart(tiers, len(order))
	var drained sync.Once
	drain := func() {
		if opts.Planner != nil {
			drained.Do(opts.Planner.Drained)
		}
	}
	var (
		next      atomic.Int64
		stop      atomic.Bool
		mu        sync.Mutex
		errs      []error
		committed []string
		wg        sync.WaitGroup
	)
	workers := min(max(opts.Parallel, 1), len(order))
	var preparing chan struct{} // a token per action preparing
	if opts.Preparing > 0 && opts.Preparing < workers {
		preparing = make(chan struct{}, opts.Preparing)
	}
	for slot := 0; slot < workers; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(order)-1 {
					drain()
				}
				if i >= len(order) {
					return
				}
				a := order[i]
				select {
				case <-gate.wait(i):
				case <-ctx.Done():
					return
				}
				if preparing != nil {
					select {
					case preparing <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
				began := beganFunc(gate, i, preparing)
				obs.Started(a, slot)
				res, done, err := runSafe(ctx, executor.Job{Action: a, Rank: i, Weight: est.Weight(a), Expected: est.Expected(a),
					Events: jobEvents{a: a, began: began, slots: opts.Slots}}, ex, st)
				began()
				if opts.Planner != nil {
					opts.Planner.Ended(a)
				}
				obs.Finished(a, slot, res, err)
				mu.Lock()
				committed = append(committed, done...)
				if err != nil {
					errs = append(errs, err)
					stop.Store(true)
					drain()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		for _, p := range committed {
			os.Remove(p)
		}
		return errors.Join(errs...)
	}
	return nil
}

// beganFunc returns what marks action i begun, at most once however often
// it is called (a race's two sides, then its end): for the head start if
// it waits for i, and giving back i's preparing token if it holds one.
func beganFunc(gate *headStart, i int, preparing chan struct{}) func() {
	var head func()
	if gate.counts(i) {
		head = gate.begun(i)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if head != nil {
				head()
			}
			if preparing != nil {
				<-preparing
			}
		})
	}
}

// runOne executes j's action into staged outputs (j.Out) and renames them
// into place.
func runOne(ctx context.Context, j executor.Job, ex executor.Executor, st *staging) (*executor.Result, []string, error) {
	a := j.Action
	out := make([]string, len(a.Outputs))
	for i, o := range a.Outputs {
		p, err := st.path(a.Abs(o.Path))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.ID, err)
		}
		out[i] = p
	}
	placed := 0
	defer func() {
		for _, p := range out[placed:] {
			os.Remove(p) // whatever was not renamed into place
		}
	}()
	j.Out = out
	res, err := ex.Execute(ctx, j)
	if err != nil {
		var be *executor.BackendError
		if !errors.As(err, &be) && ctx.Err() == nil {
			err = fmt.Errorf("%s: %w", a.ID, err)
		}
		return res, nil, err
	}
	var done []string
	for i, o := range a.Outputs {
		final := a.Abs(o.Path)
		// syscall.Rename, not os.Rename, which first lstats final to
		// refuse a directory there (rename(2) refuses it too, EISDIR):
		// a system call per output.
		if err := syscall.Rename(out[i], final); err != nil {
			err = &os.LinkError{Op: "rename", Old: out[i], New: final, Err: err}
			return res, done, fmt.Errorf("%s: placing output %s: %w", a.ID, o.Path, err)
		}
		done = append(done, final)
		placed++
	}
	return res, done, nil
}

// Preflight checks that every input of every action exists before anything
// runs (clang exits 0 with an empty object when an import is missing).
// Each distinct file is looked at once, however many actions import it.
func Preflight(actions []*action.Action) error { return preflight(actions, nil) }

// preflight is Preflight, knowing that the modules est weighs by their
// files exist (Weigh found them): it does not look at those again.
func preflight(actions []*action.Action, est *Estimates) error {
	sizes := map[string]int64{}
	var missing []Missing
	for _, a := range actions {
		for _, in := range a.Inputs {
			if in.Role == action.RoleModule && a.ModuleSize == 0 && est.Weight(a) > 0 {
				continue // weighed by its file: it exists
			}
			p := a.Abs(in.Local())
			size, ok := sizes[p]
			if !ok {
				fi, err := os.Stat(p)
				switch {
				case err != nil:
					size = -1
					missing = append(missing, Missing{a, fmt.Sprintf("%s: %s %s does not exist (%v)", a.ID, in.Role, quoteIf(in.Local()), errors.Unwrap(err))})
				case fi.IsDir():
					size = -1
					missing = append(missing, Missing{a, fmt.Sprintf("%s: %s %s is a directory, not a file", a.ID, in.Role, quoteIf(in.Local()))})
				default:
					size = fi.Size()
				}
				sizes[p] = size
			} else if size < 0 {
				missing = append(missing, Missing{a, fmt.Sprintf("%s: %s %s does not exist", a.ID, in.Role, quoteIf(in.Local()))})
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &MissingInputs{Missing: missing}
}

// Missing is one input Preflight did not find.
type Missing struct {
	Action *action.Action
	Msg    string // names the action's module and the input
}

// MissingInputs is Preflight's error: every missing input of every action.
type MissingInputs struct{ Missing []Missing }

func (e *MissingInputs) Error() string {
	const show = 20
	var lines []string
	for i, m := range e.Missing {
		if i == show {
			lines = append(lines, fmt.Sprintf("... and %d more", len(e.Missing)-show))
			break
		}
		lines = append(lines, m.Msg)
	}
	return fmt.Sprintf("missing inputs; nothing was compiled (every input must exist before a backend runs: "+
		"a missing import makes clang write an empty object):\n  %s", strings.Join(lines, "\n  "))
}

func quoteIf(p string) string { return fmt.Sprintf("%q", p) }

type nopObserver struct{}

func (nopObserver) Planned(int, *Estimates)                               {}
func (nopObserver) Started(*action.Action, int)                           {}
func (nopObserver) Finished(*action.Action, int, *executor.Result, error) {}
