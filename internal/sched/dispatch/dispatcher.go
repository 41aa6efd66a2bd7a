// Package dispatch is the scheduling policy of a run with remote
// execution: which side runs each action, which remote actions a free
// local slot races, which run on two workers, and how many actions the
// scheduler keeps in flight and preparing. The Dispatcher holds the slots
// (this machine's process slots, Processes; its own remote ones) and the
// Plan it makes of the run's order (NewPlan), and applies its rules
// (choose.go) whenever a slot frees. The executors that use it declare
// what they need of it (executor.Sides for the Hybrid, executor.Spare for
// the races, a pick function for the Hedge) and know nothing of its
// rules; the scheduler tells it the order and each action's end
// (schedule.Planner).
package dispatch

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sched/slots"
)

// Dispatcher hands out a Hybrid's slots: to actions to start (the
// Hybrid's Execute, through executor.Sides) and, as the Spare of the races on the remote side, to
// second tries waiting for a local slot. Its remote slots are its own
// (the actions the Hybrid has on the remote side, RemoteSlots); its local
// ones are this machine's process slots (Processes), which it takes as
// they free, up to LocalSlots at once, and which the local executors
// beside the Hybrid ask for through it (Processes). It is the run's
// planner (schedule.Planner): the Plan it is given ranks the waiters, and
// its critical and two-worker actions are the Plan's. Built first, before
// the executors that use it (executor.NewHybrid, Race, NewHedge, their
// local executors).
type Dispatcher struct {
	o Options
	// local is this machine's process slots; pools are where each side's
	// slots come from: [remoteSide] the Dispatcher's own, [localSide]
	// local.Slots.
	local Processes
	pools [2]*slots.Pool

	// Set by Plan before the first Execute, read-only after.
	plan Plan

	mu sync.Mutex
	// settled[r] says that the head-start action of rank r has arrived
	// here or ended elsewhere (Ended); every rank below settledUpTo has.
	// An action takes a slot only if as many remain for the head-start
	// actions ranked before it that have not: those start together, and
	// the largest, whose key takes longest to compute, would otherwise
	// arrive last and find this machine's few slots taken.
	settled     []bool
	settledUpTo int
	localHeld   int                  // local slots granted and not yet given back (at most LocalSlots)
	queue       slots.Queue[*waiter] // actions waiting to start, in plan order
	spares      slots.Queue[*waiter] // races waiting for a local slot, oldest first
	drained     bool
	paces       [2]pace // [remoteSide], [localSide]
	// wake, when set, dispatches again at wakeAt, when a race waiting in
	// the cluster's queue will have waited queuedLong.
	wake   *time.Timer
	wakeAt time.Time
	// stagesSeen: the server has reported a worker taking an action
	// (Executing), so an action not reported is in its queue, not
	// running unreported.
	stagesSeen bool

	atStart  atomic.Int64 // races of critical actions, granted with the remote run
	arrivals atomic.Int64
}

const (
	remoteSide = 0
	localSide  = 1
)

// waiter waits for a side's slot: its Rank orders it in its queue,
// its grant is the side.
type waiter struct {
	slots.Waiter
	planned  int  // the action's rank in the plan (Rank, for a race's waiter, is its arrival)
	critical bool // a critical action: remote only; its race starts at once
	// slowUpload: its upload alone would take longer than compiling it
	// here (slowUpload); set for an action to start.
	slowUpload bool
	length     float64 // the action's lengthOf (0: not planned)
	// stage, for a race's waiter, is its remote side's progress.
	stage executor.Progress
	// since is when it began to wait.
	since time.Time
}

// NewDispatcher returns the Dispatcher of a Hybrid with o's bounds, its
// local slots taken from local.
func NewDispatcher(o Options, local Processes) *Dispatcher {
	return &Dispatcher{o: o, local: local, pools: [2]*slots.Pool{slots.NewPool(o.RemoteSlots), local.Slots}}
}

// Processes is the Limiter of the local executors beside the Hybrid
// (Fallback's, LocalFor's): this machine's process slots, as d's local
// grants take them, with each slot given back offered to d's waiters.
func (d *Dispatcher) Processes() Processes {
	p := d.local
	p.freed = d.redispatch
	return p
}

// Granted is the Limiter of the local executors that run in a local slot
// d granted: the Hybrid's local side and the races' second tries.
func (d *Dispatcher) Granted() Granted { return Granted{Tokens: d.local.Tokens} }

// Plan implements schedule.Planner: it plans the actions in the order given
// (NewPlan). It must be called before the first Execute or Wait.
func (d *Dispatcher) Plan(order []*action.Action, est *schedule.Estimates) []int {
	d.plan = NewPlan(order, est, d.o)
	d.mu.Lock()
	d.settled, d.settledUpTo = make([]bool, d.plan.head), 0
	d.mu.Unlock()
	return d.plan.Tiers()
}

// OnTwoWorkers reports whether a should run on a second worker as well
// (Plan.OnTwoWorkers); a Hedge picks its actions with it.
func (d *Dispatcher) OnTwoWorkers(a *action.Action) bool { return d.plan.OnTwoWorkers(a) }

// settle marks the head-start action of rank r settled (Plan). d.mu is
// held.
func (d *Dispatcher) settle(r int) {
	if r < 0 || r >= len(d.settled) {
		return
	}
	d.settled[r] = true
	for d.settledUpTo < len(d.settled) && d.settled[d.settledUpTo] {
		d.settledUpTo++
	}
}

// unsettledBefore is how many head-start actions ranked before r have
// neither arrived nor ended. d.mu is held.
func (d *Dispatcher) unsettledBefore(r int) int {
	n := 0
	for k := d.settledUpTo; k < min(r, len(d.settled)); k++ {
		if !d.settled[k] {
			n++
		}
	}
	return n
}

// Ended implements schedule.Planner.
func (d *Dispatcher) Ended(a *action.Action) {
	r, ok := d.plan.rank[a]
	if !ok || r >= len(d.settled) {
		return // not a head-start action: nothing waits for it (settled is set by Plan)
	}
	d.mu.Lock()
	d.settle(r)
	d.dispatch()
	d.mu.Unlock()
}

// Drained implements schedule.Planner: from now on free local slots go to any race.
func (d *Dispatcher) Drained() {
	d.mu.Lock()
	d.drained = true
	d.dispatch()
	d.mu.Unlock()
}

// Wait implements executor.Spare for the races of remote actions: a local
// slot at once for a critical action, else once nothing waits for one to
// start an action. primary is the race's remote side's progress, which
// the rules read (choose.go).
func (d *Dispatcher) Wait(ctx context.Context, a *action.Action, primary executor.Progress) (func(), error) {
	w := d.waiter(a)
	w.Rank = int(d.arrivals.Add(1)) // oldest first
	w.stage = primary
	side, err := d.enqueue(ctx, w, &d.spares)
	if err != nil {
		return nil, err
	}
	if w.critical {
		d.atStart.Add(1)
	}
	var once sync.Once
	return func() { once.Do(func() { d.release(side) }) }, nil
}

// Start implements executor.Sides: it waits for a slot for a, to start
// it (Hybrid.Execute), and returns the side granted; Release gives it
// back.
func (d *Dispatcher) Start(ctx context.Context, a *action.Action) (executor.Side, error) {
	w := d.waiter(a)
	d.mu.Lock()
	d.settle(w.Rank)
	d.mu.Unlock()
	w.slowUpload = d.slowUpload(a)
	side, err := d.enqueue(ctx, w, &d.queue)
	return sideOf[side], err
}

// Release implements executor.Sides.
func (d *Dispatcher) Release(s executor.Side) { d.release(indexOf(s)) }

// RacedAtStart is how many races of critical actions were granted a
// local slot with the remote run (raceAtStart).
func (d *Dispatcher) RacedAtStart() int64 { return d.atStart.Load() }

// sideOf is the executor.Side of each index of pools and paces.
var sideOf = [2]executor.Side{remoteSide: executor.RemoteSide, localSide: executor.LocalSide}

func indexOf(s executor.Side) int {
	if s == executor.LocalSide {
		return localSide
	}
	return remoteSide
}

func (d *Dispatcher) waiter(a *action.Action) *waiter {
	rank, ok := d.plan.rank[a]
	if !ok {
		// Not planned: after the planned ones, first come first served.
		rank = math.MaxInt32 + int(d.arrivals.Add(1))
	}
	w := &waiter{Waiter: slots.NewWaiter(rank), planned: rank, critical: d.plan.critical[a], since: time.Now()}
	if ok {
		w.length = d.plan.length(a)
	}
	return w
}

// enqueue adds w to list, ordered by rank, and waits for its grant, the
// side (slots.Wait: a waiter that gives up is removed; a grant that came
// meanwhile goes back).
func (d *Dispatcher) enqueue(ctx context.Context, w *waiter, list *slots.Queue[*waiter]) (int, error) {
	d.mu.Lock()
	list.Add(w)
	d.dispatch()
	d.mu.Unlock()
	return slots.Wait(ctx, &d.mu, list, w, d.release)
}

func (d *Dispatcher) release(side int) {
	d.mu.Lock()
	if side == localSide {
		d.localHeld--
	}
	d.pools[side].Release()
	d.dispatch()
	d.mu.Unlock()
}

// redispatch grants again: a local slot may have been freed outside d.
func (d *Dispatcher) redispatch() {
	d.mu.Lock()
	d.dispatch()
	d.mu.Unlock()
}

// free is how many slots d may grant now on each side: its remote ones,
// and this machine's free process slots, no more than would put it over
// LocalSlots. d.mu is held.
func (d *Dispatcher) free() [2]int {
	return [2]int{d.pools[remoteSide].Free(), max(0, min(d.pools[localSide].Free(), d.o.LocalSlots-d.localHeld))}
}

// grant takes a slot on side from its pool for waiter i of list, grants it
// and removes the waiter from list; free is dispatch's count of the slots
// left. A process slot that a local executor beside the Hybrid took since
// free was read is not granted: free then shows none left on that side.
// d.mu is held.
func (d *Dispatcher) grant(list *slots.Queue[*waiter], i, side int, free *[2]int) {
	if !d.pools[side].TryAcquire() {
		free[side] = 0
		return
	}
	if side == localSide {
		d.localHeld++
	}
	free[side]--
	list.Grant(i, side)
}

// pace is what one side has taken per unit of length (lengthOf) over the
// actions it finished: here a compiler's wall time, on the cluster a
// worker's executing time.
type pace struct{ seconds, length float64 }

// per is the seconds per unit of length, 0 before anything finished.
func (p pace) per() float64 {
	if p.length <= 0 {
		return 0
	}
	return p.seconds / p.length
}

// Ran implements executor.Sides: it adds a's result to its side's pace.
// A race won here counts for this machine; the cluster's loser,
// cancelled, says nothing.
func (d *Dispatcher) Ran(a *action.Action, res *executor.Result) {
	if res == nil || d.plan.length == nil {
		return
	}
	length := d.plan.length(a)
	side, took := localSide, res.Wall
	switch res.Where {
	case executor.Local:
	case executor.Remote:
		side, took = remoteSide, 0
		for _, s := range res.Steps {
			if s.Kind == executor.StepExecuting {
				took = s.Took()
			}
		}
	default:
		return // a cache's: nothing ran
	}
	if length <= 0 || took <= 0 {
		return
	}
	d.mu.Lock()
	d.stagesSeen = d.stagesSeen || side == remoteSide
	d.paces[side].seconds += took.Seconds()
	d.paces[side].length += length
	d.mu.Unlock()
}
