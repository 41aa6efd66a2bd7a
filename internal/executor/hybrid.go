package executor

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// HybridOptions configures NewHybrid.
type HybridOptions struct {
	// RemoteSlots and LocalSlots bound the actions in flight on each
	// side (--remote-jobs, --remote-local-jobs). With no local slot,
	// every action goes remote and none is raced.
	RemoteSlots, LocalSlots int
	// Races says that the remote side races (Race, with the Hybrid as its
	// Spare): the actions that bound the link's length are then raced
	// from the start.
	Races bool
}

// HybridStats are what a Hybrid did in a run.
type HybridStats struct {
	Remote, Local int64 // actions started on each side
	Races         int64 // remote actions that a local run joined
	RacesWonHere  int64 // ... and that the local run won
	RacedAtStart  int64 // races of critical actions, started with the remote run
}

// Hybrid runs each action on whichever side has a free slot, so that with
// remote execution the local cores keep compiling too. Waiting actions
// start in the caller's order (largest or longest expected first),
// whatever order they arrive in: a cache lookup ahead of the Hybrid ends in
// any order.
//
// With races (Options.Races) local slots are the link's reserve against a
// slow or stalled worker (Race; Bazel's dynamic execution does the same):
// actions go to the cluster's slots first and to this machine's once those
// are full or the cluster is backlogged (backlogged), and free local slots
// race remote actions:
//   - Critical actions, those whose length alone is over half the
//     link's expected makespan (Plan), are raced from the start: if a
//     worker is slow on one of them nothing else can hide it. At most one
//     per local slot, and only on a cluster seen wider than this machine
//     (raceAtStart); on one no wider they are raced as any other.
//   - Once the caller has started everything (Drained), a free local slot
//     joins the remote action whose result should come last (nextRace):
//     the newest of those still in the cluster's queue, else the one a
//     worker has run longest. Once the cluster has shown itself slower
//     per action than this machine, the one a local run would beat by
//     the most instead (raceSlowCluster).
//   - Before that, a free local slot joins an action that has waited long
//     in the cluster's queue (raceQueued): the cluster is narrower than
//     what was sent to it, and this machine's slots would otherwise idle.
//
// The first verified result wins and the other side is cancelled. Without
// races, this machine's slots are taken first (they are few and certain).
// The aim either way is a cold link no slower than a local one, however
// slow or narrow the cluster; bench/RESULTS.md measures how near it comes.
//
// Under make's jobserver a local slot may still wait for a token in the
// local executor's Limiter; Hybrid counts --jobs only.
type Hybrid struct {
	remote, local Executor
	o             HybridOptions

	// Set by Plan before the first Execute, read-only after.
	rank     map[*action.Action]int
	critical map[*action.Action]bool
	hedge    map[*action.Action]bool
	length   func(*action.Action) float64 // lengthOf the planned actions

	mu sync.Mutex
	// settled[r] says that the head-start action of rank r has arrived
	// here or ended elsewhere (Ended); every rank below settledUpTo has.
	// An action takes a slot only if as many remain for the head-start
	// actions ranked before it that have not: those start together, and
	// the largest, whose key takes longest to compute, would otherwise
	// arrive last and find this machine's few slots taken.
	settled     []bool
	settledUpTo int
	free        [2]int          // free slots: [remoteSide], [localSide]
	queue       []*hybridWaiter // actions waiting to start, in plan order
	spares      []*hybridWaiter // races waiting for a local slot, oldest first
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

	started  [2]atomic.Int64
	races    atomic.Int64
	wonHere  atomic.Int64
	atStart  atomic.Int64
	arrivals atomic.Int64
}

const (
	remoteSide = 0
	localSide  = 1
)

type hybridWaiter struct {
	rank     int
	planned  int      // the action's rank in the plan (rank, for a race's waiter, is its arrival)
	critical bool     // a critical action: remote only; its race starts at once
	length   float64  // the action's lengthOf (0: not planned)
	grant    chan int // the side granted; buffered
	// stage, for a race's waiter, is its remote side's progress.
	stage *Stage
	// since is when it began to wait.
	since time.Time
}

// NewHybrid returns the executor. remote builds the remote side from the
// Hybrid's Spare (for a Race on that side to take the local slots that
// would idle); it should fall back to local by itself (Fallback) where
// that is wanted: Hybrid only chooses a side.
func NewHybrid(remote func(Spare) Executor, local Executor, o HybridOptions) *Hybrid {
	h := &Hybrid{local: local, o: o}
	h.free[remoteSide], h.free[localSide] = max(o.RemoteSlots, 1), max(o.LocalSlots, 0)
	h.remote = remote(h)
	return h
}

// Stats returns the counts of the run so far.
func (h *Hybrid) Stats() HybridStats {
	return HybridStats{Remote: h.started[remoteSide].Load(), Local: h.started[localSide].Load(),
		Races: h.races.Load(), RacesWonHere: h.wonHere.Load(), RacedAtStart: h.atStart.Load()}
}

// Plan implements Planner: it ranks the actions in the order given and
// marks the critical ones. It must be called before the first Execute.
// The long actions at the head of the order (Critical without a limit)
// get a head start: on a cluster wide enough for the link's length to be
// theirs, their inputs are then hashed and uploaded before hundreds of
// others compete with them for this machine's CPU and the link. They
// start in tiers of length (headTiers).
func (h *Hybrid) Plan(order []*action.Action) []int {
	h.rank = make(map[*action.Action]int, len(order))
	for i, a := range order {
		h.rank[a] = i
	}
	h.length = lengthOf(order)
	if h.o.Races {
		// At least one: with no local slot it may still be hedged on a
		// second worker (Hedges).
		h.critical = Critical(order, h.o.RemoteSlots+h.o.LocalSlots, max(h.o.LocalSlots, 1))
		h.hedge = withinBudget(order, h.critical, HedgeBudget)
	}
	long := Critical(order, h.o.RemoteSlots+h.o.LocalSlots, len(order))
	head := 0
	for head < len(order) && long[order[head]] {
		head++
	}
	if head == len(order) {
		head = 0 // all of them: nothing to wait for
	}
	h.mu.Lock()
	h.settled, h.settledUpTo = make([]bool, head), 0
	h.mu.Unlock()
	return headTiers(order[:head], h.length)
}

// headTierWidth is the share of the longest action's length that the
// actions of one head-start tier span.
const headTierWidth = 1.0 / 8

// headTiers splits the head-start actions (longest first) into tiers for
// the scheduler (Planner.Plan): an action a fraction f shorter than the
// longest may begin f × that length later without making the link
// longer, so tier k, the actions between k/8 and (k+1)/8 shorter, waits
// for the tiers before it to begin. Each tier then prepares while the ones
// before it run, instead of every long action preparing at once and the
// longest, which bounds the link, finishing no sooner than the shortest.
func headTiers(head []*action.Action, length func(*action.Action) float64) []int {
	if len(head) == 0 {
		return nil
	}
	longest := length(head[0])
	var tiers []int
	tier := 0
	for i, a := range head {
		k := tier
		if longest > 0 {
			k = max(tier, int((longest-length(a))/(longest*headTierWidth)))
		}
		if k > tier {
			tiers = append(tiers, i)
			tier = k
		}
	}
	return append(tiers, len(head))
}

// settle marks the head-start action of rank r settled (Plan). h.mu is
// held.
func (h *Hybrid) settle(r int) {
	if r < 0 || r >= len(h.settled) {
		return
	}
	h.settled[r] = true
	for h.settledUpTo < len(h.settled) && h.settled[h.settledUpTo] {
		h.settledUpTo++
	}
}

// unsettledBefore is how many head-start actions ranked before r have
// neither arrived nor ended. h.mu is held.
func (h *Hybrid) unsettledBefore(r int) int {
	n := 0
	for k := h.settledUpTo; k < min(r, len(h.settled)); k++ {
		if !h.settled[k] {
			n++
		}
	}
	return n
}

// Ended implements Planner.
func (h *Hybrid) Ended(a *action.Action) {
	r, ok := h.rank[a]
	if !ok || r >= len(h.settled) {
		return // not a head-start action: nothing waits for it (settled is set by Plan)
	}
	h.mu.Lock()
	h.settle(r)
	h.dispatch()
	h.mu.Unlock()
}

// HedgeBudget is the share of a link's work (Σ lengths) that hedges may
// add: a second execution of the critical actions pays on a link of
// hundreds of actions, where the longest few are a small part of the
// work and alone bound its length, not on one of six, where the longest
// is a third of the work and a second run of it a third more.
const HedgeBudget = 0.05

// Hedges reports whether a should run on a second worker as well
// (Hedge): it is critical (Plan, with races) and, with the critical
// actions longer than it, no more than HedgeBudget of the link's work.
func (h *Hybrid) Hedges(a *action.Action) bool { return h.hedge[a] }

// withinBudget returns the longest of the chosen actions whose lengths
// (as Critical measures them) add up to at most budget × the sum over
// all actions.
func withinBudget(actions []*action.Action, chosen map[*action.Action]bool, budget float64) map[*action.Action]bool {
	length := lengthOf(actions)
	var sum float64
	var picked []*action.Action
	for _, a := range actions {
		sum += length(a)
		if chosen[a] {
			picked = append(picked, a)
		}
	}
	sort.SliceStable(picked, func(i, j int) bool { return length(picked[i]) > length(picked[j]) })
	out := map[*action.Action]bool{}
	var spent float64
	for _, a := range picked {
		if spent += length(a); spent > budget*sum {
			break
		}
		out[a] = true
	}
	return out
}

// lengthOf returns how Critical measures an action: its Expected time
// when every action has one (history), else its Weight (module size).
func lengthOf(actions []*action.Action) func(*action.Action) float64 {
	timed := true
	for _, a := range actions {
		timed = timed && a.Expected > 0
	}
	return func(a *action.Action) float64 {
		if timed {
			return float64(a.Expected)
		}
		return float64(a.Weight)
	}
}

// Critical returns the actions, at most limit of them, whose length alone
// is over half the makespan expected on slots slots: max(longest,
// Σ lengths / slots). Lengths are the actions' Expected times when every
// action has one (history), else their Weight (module size), which is
// what orders them.
func Critical(actions []*action.Action, slots, limit int) map[*action.Action]bool {
	if limit <= 0 || len(actions) == 0 {
		return nil
	}
	length := lengthOf(actions)
	byLength := make([]*action.Action, len(actions))
	copy(byLength, actions)
	sort.SliceStable(byLength, func(i, j int) bool { return length(byLength[i]) > length(byLength[j]) })
	var sum float64
	for _, a := range actions {
		sum += length(a)
	}
	makespan := math.Max(length(byLength[0]), sum/float64(max(slots, 1)))
	crit := map[*action.Action]bool{}
	for _, a := range byLength[:min(limit, len(byLength))] {
		if length(a) <= makespan/2 {
			break
		}
		crit[a] = true
	}
	return crit
}

// Execute implements Executor.
func (h *Hybrid) Execute(ctx context.Context, j Job) (*Result, error) {
	a := j.Action
	w := h.waiter(a)
	h.mu.Lock()
	h.settle(w.rank)
	h.mu.Unlock()
	side, err := h.enqueue(ctx, w, &h.queue)
	if err != nil {
		return nil, err
	}
	defer h.release(side)
	h.started[side].Add(1)
	if side == localSide {
		res, err := h.local.Execute(ctx, j)
		if err == nil {
			h.observe(a, res)
		}
		return res, err
	}
	res, err := h.remote.Execute(ctx, j)
	if err == nil {
		h.observe(a, res)
	}
	if res != nil && res.Raced {
		h.races.Add(1)
		if res.Where == Local {
			h.wonHere.Add(1)
		}
	}
	return res, err
}

// Drained implements Planner: from now on free local slots go to any race.
func (h *Hybrid) Drained() {
	h.mu.Lock()
	h.drained = true
	h.dispatch()
	h.mu.Unlock()
}

// Wait implements Spare for the races of remote actions: a local slot at
// once for a critical action, else once nothing waits for one to start an
// action.
func (h *Hybrid) Wait(ctx context.Context, j Job) (func(), error) {
	w := h.waiter(j.Action)
	w.rank = int(h.arrivals.Add(1)) // oldest first
	w.stage = j.Stage
	side, err := h.enqueue(ctx, w, &h.spares)
	if err != nil {
		return nil, err
	}
	if w.critical {
		h.atStart.Add(1)
	}
	var once sync.Once
	return func() { once.Do(func() { h.release(side) }) }, nil
}

func (h *Hybrid) waiter(a *action.Action) *hybridWaiter {
	rank, ok := h.rank[a]
	if !ok {
		// Not planned: after the planned ones, first come first served.
		rank = math.MaxInt32 + int(h.arrivals.Add(1))
	}
	w := &hybridWaiter{rank: rank, planned: rank, critical: h.critical[a], grant: make(chan int, 1), since: time.Now()}
	if ok {
		w.length = h.length(a)
	}
	return w
}

// enqueue adds w to list, ordered by rank, and waits for its grant. A
// waiter that gives up is removed; a grant that came meanwhile goes back.
func (h *Hybrid) enqueue(ctx context.Context, w *hybridWaiter, list *[]*hybridWaiter) (int, error) {
	h.mu.Lock()
	i := sort.Search(len(*list), func(i int) bool { return (*list)[i].rank > w.rank })
	*list = append(*list, nil)
	copy((*list)[i+1:], (*list)[i:])
	(*list)[i] = w
	h.dispatch()
	h.mu.Unlock()
	select {
	case side := <-w.grant:
		return side, nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	if removeWaiter(list, w) {
		h.mu.Unlock()
		return 0, ctx.Err()
	}
	h.mu.Unlock()
	h.release(<-w.grant)
	return 0, ctx.Err()
}

func removeWaiter(list *[]*hybridWaiter, w *hybridWaiter) bool {
	for i, x := range *list {
		if x == w {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

func (h *Hybrid) release(side int) {
	h.mu.Lock()
	h.free[side]++
	h.dispatch()
	h.mu.Unlock()
}

// dispatch hands free slots to waiters: local slots to the races of
// critical actions first; then slots to actions to start, in rank order
// (leaving one for each better-ranked head-start action not yet here),
// remote slots before local ones when racing and the cluster is not
// backlogged, local first otherwise (a critical action takes a remote one
// only, and so does one ranked before an action in the cluster's queue:
// lastQueued); then free local slots to races (nextRace). h.mu is held.
func (h *Hybrid) dispatch() {
	now := time.Now()
	// Only an action waiting to start asks (backlogged scans the races).
	backlog := h.o.Races && len(h.queue) > 0 && h.backlogged(now)
	// Under a backlog, the cluster still gets an action it would serve
	// before one it queues (lastQueued).
	var lastQueued int
	if backlog {
		lastQueued = h.lastQueued()
	}
	for i := 0; i < len(h.spares) && h.free[localSide] > 0; {
		if w := h.spares[i]; w.critical && h.raceAtStart(w, now) {
			h.grant(&h.spares, i, localSide)
			continue
		}
		i++
	}
	for i := 0; i < len(h.queue) && h.free[remoteSide]+h.free[localSide] > 0; {
		w := h.queue[i]
		// A slot is left for each action ranked before w that has yet
		// to arrive (settle).
		p := h.unsettledBefore(w.rank)
		local, remote := h.free[localSide] > p, h.free[remoteSide] > p
		switch {
		case (!h.o.Races || backlog && !w.critical) && local:
			h.grant(&h.queue, i, localSide)
		case remote && (!backlog || w.critical || w.rank < lastQueued):
			h.grant(&h.queue, i, remoteSide)
		case !w.critical && local:
			h.grant(&h.queue, i, localSide)
		default:
			i++ // waits for a slot; the next may take another
		}
	}
	for len(h.spares) > 0 && h.free[localSide] > 0 {
		i, ok := h.nextRace(now)
		if !ok {
			break
		}
		h.grant(&h.spares, i, localSide)
	}
}

// raceAtStart decides whether the race of critical action w starts now,
// or, once the cluster has shown itself no wider than this machine, not
// from the start at all (w is then raced as any other). A race from the
// start holds one of this machine's few slots for the action's whole
// length; against a cluster of one worker slot that took the action at
// once, a cold gen5000 link compiled on one local slot of two for the 15 s
// of its main.o, and lost what the cluster gained (1.04 x this machine
// alone). So the race waits for the cluster to be seen running more
// actions at once than this machine has slots (a cluster wide enough for
// the link's length to be the critical action's soon is), or backlogged
// with no more running (narrow): at most criticalWait after the action
// was sent for execution (its own upload, main.o's hundreds of imports,
// can take longer), or criticalUpload if it is not sent by then; a server
// that reports nothing is not waited for any longer. h.mu is held.
func (h *Hybrid) raceAtStart(w *hybridWaiter, now time.Time) bool {
	executing := h.executingRaces()
	deadline := w.since.Add(criticalUpload)
	if sent := w.stage.sentAt(); !sent.IsZero() {
		deadline = sent.Add(criticalWait)
	}
	switch {
	case executing > h.o.LocalSlots:
		return true // wide: insure the action that bounds the link
	case h.backlogged(now):
		w.critical = false // narrow: raced as any other
		return false
	case now.Before(deadline):
		// Looked at again as the cluster reports on what it was sent.
		h.wakeUpAt(minTime(deadline, now.Add(criticalPoll)), now)
		return false
	}
	return true
}

// executingRaces is how many of the waiting races a worker has taken: the
// cluster's width as this link sees it. h.mu is held.
func (h *Hybrid) executingRaces() int {
	n := 0
	for _, w := range h.spares {
		if w.stage.isExecuting() {
			n++
		}
	}
	return n
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// criticalWait is how long after a critical action was sent for execution
// its race waits at most to see how wide the cluster is: a worker's taking
// an action shows within a round trip or two, and a narrow cluster's
// backlog within queuedLong of the first actions it could not take.
const criticalWait = 300 * time.Millisecond

// criticalUpload is how long a critical action's race waits at most for
// its remote side to be sent for execution.
const criticalUpload = time.Second

// criticalPoll is how often a critical race that waits looks at the
// cluster again.
const criticalPoll = 20 * time.Millisecond

// backlogged reports whether a remote action has waited queuedLong in
// the cluster's queue: the cluster is narrower than what was sent to it.
// An action to start then goes to this machine's slots, or waits for one,
// rather than to the back of that queue: there it would only be raced
// (raceQueued) once it had cost this machine an Execute stream, its
// updates and a cancellation. Unless it is ranked before an action in
// that queue (lastQueued): the cluster serves it first. h.mu is held.
func (h *Hybrid) backlogged(now time.Time) bool {
	if !h.seesStages() {
		return false
	}
	for _, w := range h.spares {
		if w.stage.queuedFor(now) >= queuedLong {
			return true
		}
	}
	return false
}

// seesStages reports whether the server says when a worker takes an
// action. One that never does (REAPI does not require it) would have every
// action look queued to the end: it is then never taken for backlogged.
// h.mu is held.
func (h *Hybrid) seesStages() bool {
	for i := 0; !h.stagesSeen && i < len(h.spares); i++ {
		h.stagesSeen = h.spares[i].stage.isExecuting()
	}
	return h.stagesSeen
}

// lastQueued is the worst plan rank among the remote actions not yet
// taken by a worker (sent, or being sent), -1 if none. Each action is sent
// with its rank as its ExecutionPolicy priority, and the cluster serves
// its queue by priority (Buildbarn's scheduler orders an invocation's
// queued operations so), so an action ranked before that one is served
// before it: held here for a local slot instead, a long action ready
// after hundreds of short ones were sent waited for this machine's slots,
// busy with the link's longest actions (races), and ran 0.6 s late (one
// 7-Zip link in five at 64 slots, 1.07-1.55 times the ideal). h.mu is
// held.
func (h *Hybrid) lastQueued() int {
	last := -1
	for _, w := range h.spares {
		if !w.stage.isExecuting() {
			last = max(last, w.planned)
		}
	}
	return last
}

// queuedLong is how long a remote action must have waited in the
// cluster's queue for a free local slot to race it before the caller has
// started everything: by then the cluster is narrower than what was sent
// to it. A worker's taking an action reaches this machine within a round
// trip or so; far less than this.
const queuedLong = 100 * time.Millisecond

// raceQueued is the race a free local slot should join before the caller
// has started everything (Drained): the newest of those whose remote side
// has waited queuedLong in the cluster's queue. Without it a local slot
// idles while the cluster queues hundreds of actions: with races remote
// slots are taken first, and --remote-jobs (256) is more than a cluster of
// one slot, or of 16 slow ones, runs at once; on those a cold gen500 link
// compiled here at a sixth of this machine's rate until the last action
// had started. If none has waited long enough yet, a timer dispatches
// again when the first will have. h.mu is held.
func (h *Hybrid) raceQueued(now time.Time) (int, bool) {
	if !h.seesStages() {
		return 0, false
	}
	var next time.Time
	for i := len(h.spares) - 1; i >= 0; i-- {
		q := h.spares[i].stage.queuedFor(now)
		if q >= queuedLong {
			return i, true
		}
		if t := now.Add(queuedLong - q); q > 0 && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() {
		h.wakeUpAt(next, now)
	}
	return 0, false
}

// wakeUpAt makes the Hybrid dispatch again at t, unless it is to already
// by then. h.mu is held.
func (h *Hybrid) wakeUpAt(t, now time.Time) {
	if !h.wakeAt.IsZero() && !t.Before(h.wakeAt) {
		return
	}
	if h.wake != nil {
		h.wake.Stop()
	}
	h.wakeAt = t
	h.wake = time.AfterFunc(t.Sub(now), func() {
		h.mu.Lock()
		h.wakeAt = time.Time{}
		h.dispatch()
		h.mu.Unlock()
	})
}

// nextRace is the waiting race a free local slot should join: the remote
// action whose result should come last. That is one still in the cluster's
// queue, the newest of those (the cluster serves better-ranked actions
// first), as long as any waits there: a worker is already running every
// other, and cancelling one for a local run throws its progress away. On a
// cluster slower than this machine (16 slots each ten times slower, gen500)
// racing the longest-running first cancelled 192 executions, the link no
// faster than on this machine alone. Once none is queued, the one executing
// longest: a slow or stuck worker's. Before the caller has started
// everything, only one that has waited long in the cluster's queue
// (raceQueued). h.mu is held.
func (h *Hybrid) nextRace(now time.Time) (int, bool) {
	if !h.drained {
		return h.raceQueued(now)
	}
	if i, ok := h.raceSlowCluster(now); ok {
		return i, true
	}
	for i := len(h.spares) - 1; i >= 0; i-- {
		if !h.spares[i].stage.isExecuting() {
			return i, true
		}
	}
	return 0, true
}

// grant gives waiter i of list a slot on side and removes it from list.
func (h *Hybrid) grant(list *[]*hybridWaiter, i, side int) {
	h.free[side]--
	(*list)[i].grant <- side
	*list = append((*list)[:i], (*list)[i+1:]...)
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

// observe adds a's result to its side's pace. A race won here counts for
// this machine; the cluster's loser, cancelled, says nothing.
func (h *Hybrid) observe(a *action.Action, res *Result) {
	if res == nil || h.length == nil {
		return
	}
	length := h.length(a)
	side, took := localSide, res.Wall
	switch res.Where {
	case Local:
	case Remote:
		side, took = remoteSide, 0
		for _, s := range res.Steps {
			if s.Name == "executing" {
				took = s.End.Sub(s.Start)
			}
		}
	default:
		return // a cache's: nothing ran
	}
	if length <= 0 || took <= 0 {
		return
	}
	h.mu.Lock()
	h.stagesSeen = h.stagesSeen || side == remoteSide
	h.paces[side].seconds += took.Seconds()
	h.paces[side].length += length
	h.mu.Unlock()
}

// slowCluster is how many times slower per unit of length than this
// machine the cluster's workers must have been for raceSlowCluster to
// choose the races. Below it the two are close enough for the queue's
// order to matter more than lengths: a free local slot then works from
// the far end of the cluster's queue (nextRace).
const slowCluster = 1.5

// overdue is how many times its expected time a worker must have run an
// action for it to count as stuck.
const overdue = 2

// raceSlowCluster chooses the race a free local slot should join on a
// cluster that has been slower per action than this machine
// (slowCluster; a loaded or small one): the action whose remote result
// is expected the longest after a local run of it would end. Its remote
// end is its wait in the cluster's queue (the remote time of the queued
// races that came before it, spread over the workers running ours), plus
// its length times the cluster's pace, less what a worker has run it for;
// a local run ends after its length times this machine's pace. The
// cluster serves its queue largest first, so its slow slots get the
// largest actions, and racing the queue's far end regardless, as nextRace
// does on a cluster as fast as this machine, left this machine the small
// ones: a cold lua5.4 link on 16 slots each ten times slower was no
// faster than on this machine alone. An action a worker has run for over
// overdue times its expected time (a stuck or overloaded worker) is raced
// before any, the longest-running first. ok is false until both sides
// have finished an action, or on a cluster as fast as this machine. h.mu
// is held.
func (h *Hybrid) raceSlowCluster(now time.Time) (i int, ok bool) {
	remote, local := h.paces[remoteSide].per(), h.paces[localSide].per()
	if remote == 0 || local == 0 || remote < slowCluster*local {
		return 0, false
	}
	width := max(h.executingRaces(), 1) // workers running our races
	best, stuck := -1, -1
	var bestGain, stuckFor, ahead float64
	for j, w := range h.spares { // oldest first: the cluster's queue order
		if w.length <= 0 {
			continue // not planned: no length to go by
		}
		ran, expected := w.stage.executingFor(now).Seconds(), remote*w.length
		if ran > overdue*expected {
			if stuck < 0 || ran > stuckFor {
				stuck, stuckFor = j, ran
			}
			continue
		}
		wait := 0.0
		if !w.stage.isExecuting() {
			wait = ahead / float64(width)
			ahead += expected
		}
		if gain := wait + expected - ran - local*w.length; best < 0 || gain > bestGain {
			best, bestGain = j, gain
		}
	}
	switch {
	case stuck >= 0:
		return stuck, true
	case best >= 0:
		return best, true
	}
	return 0, false
}
