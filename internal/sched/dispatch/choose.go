package dispatch

import (
	"time"

	"github.com/thindist/thindist/internal/action"
)

// The choice of who gets a free slot: dispatch and the rules it applies.
// Each is a method of Dispatcher called with d.mu held; none blocks, so
// tests drive them directly on a Dispatcher's waiters.

// dispatch hands free slots to waiters: local slots to the races of
// critical actions first; then slots to actions to start, in rank order
// (leaving one for each better-ranked head-start action not yet here),
// remote slots before local ones when racing and the cluster is not
// backlogged, local first otherwise (a critical action takes a remote one
// only, and so does one ranked before an action in the cluster's queue:
// lastQueued; one whose upload alone would take longer than compiling
// it takes a local one only: slowUpload); then free local slots to races
// (nextRace). d.mu is held.
func (d *Dispatcher) dispatch() {
	now := time.Now()
	free := d.free()
	// Only an action waiting to start asks (backlogged scans the races).
	backlog := d.o.Races && len(d.queue) > 0 && d.backlogged(now)
	// Under a backlog, the cluster still gets an action it would serve
	// before one it queues (lastQueued).
	var lastQueued int
	if backlog {
		lastQueued = d.lastQueued()
	}
	for i := 0; i < len(d.spares) && free[localSide] > 0; {
		if w := d.spares[i]; w.critical && d.raceAtStart(w, now) {
			d.grant(&d.spares, i, localSide, &free)
			continue
		}
		i++
	}
	// A grant removes w (the next takes its index), and a failed one
	// leaves its side none free: either way w is looked at anew.
	for i := 0; i < len(d.queue) && free[remoteSide]+free[localSide] > 0; {
		w := d.queue[i]
		// A slot is left for each action ranked before w that has yet
		// to arrive (settle).
		p := d.unsettledBefore(w.Rank)
		local, remote := free[localSide] > p, free[remoteSide] > p
		switch {
		case w.slowUpload && local:
			d.grant(&d.queue, i, localSide, &free)
		case w.slowUpload:
			i++ // waits for a local slot, not for its upload
		case (!d.o.Races || backlog && !w.critical) && local:
			d.grant(&d.queue, i, localSide, &free)
		case remote && (!backlog || w.critical || w.Rank < lastQueued):
			d.grant(&d.queue, i, remoteSide, &free)
		case !w.critical && local:
			d.grant(&d.queue, i, localSide, &free)
		default:
			i++ // waits for a slot; the next may take another
		}
	}
	for len(d.spares) > 0 && free[localSide] > 0 {
		i, ok := d.nextRace(now)
		if !ok {
			break
		}
		d.grant(&d.spares, i, localSide, &free)
	}
}

// slowUpload reports whether a's upload alone would take longer than
// compiling it here (Options.UploadTime against its expected time):
// behind a slow uplink an action with large inputs not yet in the CAS
// ends sooner on this machine, however free the cluster. It then takes a
// local slot, or waits for one; a critical action (remote, and raced here
// from the start) and, with no local slot, every action, goes as before.
func (d *Dispatcher) slowUpload(a *action.Action) bool {
	expected := d.plan.est.Expected(a)
	if d.o.UploadTime == nil || d.o.LocalSlots <= 0 || expected <= 0 || d.plan.critical[a] {
		return false
	}
	return d.o.UploadTime(a) > expected
}

// raceAtStart decides whether the race of critical action w starts now,
// or, once the cluster has shown itself no wider than this machine, not
// from the start at all (w is then raced as any other). A race from the
// start holds one of this machine's few slots for the action's whole
// length; against a cluster that took the action at once and has few
// slots, that slot is lost to the rest of the link while the cluster runs
// the action anyway. So the race waits for the cluster to be seen running more
// actions at once than this machine has slots (a cluster wide enough for
// the link's length to be the critical action's soon is), or backlogged
// with no more running (narrow): at most criticalWait after the action
// was sent for execution (its own upload, main.o's hundreds of imports,
// can take longer), or criticalUpload if it is not sent by then; a server
// that reports nothing is not waited for any longer. d.mu is held.
func (d *Dispatcher) raceAtStart(w *waiter, now time.Time) bool {
	executing := d.executingRaces()
	deadline := w.since.Add(criticalUpload)
	if sent := sentAt(w.stage); !sent.IsZero() {
		deadline = sent.Add(criticalWait)
	}
	switch {
	case executing > d.o.LocalSlots:
		return true // wide: insure the action that bounds the link
	case d.backlogged(now):
		w.critical = false // narrow: raced as any other
		return false
	case now.Before(deadline):
		// Looked at again as the cluster reports on what it was sent.
		d.wakeUpAt(minTime(deadline, now.Add(criticalPoll)), now)
		return false
	}
	return true
}

// executingRaces is how many of the waiting races a worker has taken: the
// cluster's width as this link sees it. d.mu is held.
func (d *Dispatcher) executingRaces() int {
	n := 0
	for _, w := range d.spares {
		if isExecuting(w.stage) {
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
// that queue (lastQueued): the cluster serves it first. d.mu is held.
func (d *Dispatcher) backlogged(now time.Time) bool {
	if !d.seesStages() {
		return false
	}
	for _, w := range d.spares {
		if queuedFor(w.stage, now) >= queuedLong {
			return true
		}
	}
	return false
}

// seesStages reports whether the server says when a worker takes an
// action. One that never does (REAPI does not require it) would have every
// action look queued to the end: it is then never taken for backlogged.
// d.mu is held.
func (d *Dispatcher) seesStages() bool {
	for i := 0; !d.stagesSeen && i < len(d.spares); i++ {
		d.stagesSeen = isExecuting(d.spares[i].stage)
	}
	return d.stagesSeen
}

// lastQueued is the worst plan rank among the remote actions not yet
// taken by a worker (sent, or being sent), -1 if none. Each action is sent
// with its rank as its ExecutionPolicy priority, and the cluster serves
// its queue by priority (Buildbarn's scheduler orders an invocation's
// queued operations so), so an action ranked before that one is served
// before it. Held here for a local slot instead, a long action ready
// after hundreds of short ones were sent would wait for this machine's
// slots, busy with the link's longest actions (races), and end late.
// d.mu is held.
func (d *Dispatcher) lastQueued() int {
	last := -1
	for _, w := range d.spares {
		if !isExecuting(w.stage) {
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
// slots are taken first, and --remote-jobs may be more than a small or
// slow cluster runs at once, so this machine would compile only a
// fraction of what it can until the last action had started. If none has waited long enough yet, a timer dispatches
// again when the first will have. d.mu is held.
func (d *Dispatcher) raceQueued(now time.Time) (int, bool) {
	if !d.seesStages() {
		return 0, false
	}
	var next time.Time
	for i := len(d.spares) - 1; i >= 0; i-- {
		q := queuedFor(d.spares[i].stage, now)
		if q >= queuedLong {
			return i, true
		}
		if t := now.Add(queuedLong - q); q > 0 && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() {
		d.wakeUpAt(next, now)
	}
	return 0, false
}

// wakeUpAt makes the Hybrid dispatch again at t, unless it is to already
// by then. d.mu is held.
func (d *Dispatcher) wakeUpAt(t, now time.Time) {
	if !d.wakeAt.IsZero() && !t.Before(d.wakeAt) {
		return
	}
	if d.wake != nil {
		d.wake.Stop()
	}
	d.wakeAt = t
	d.wake = time.AfterFunc(t.Sub(now), func() {
		d.mu.Lock()
		d.wakeAt = time.Time{}
		d.dispatch()
		d.mu.Unlock()
	})
}

// nextRace is the waiting race a free local slot should join: the remote
// action whose result should come last. That is one still in the cluster's
// queue, the newest of those (the cluster serves better-ranked actions
// first), as long as any waits there: a worker is already running every
// other, and cancelling one for a local run throws its progress away (on
// a cluster slower than this machine, racing the longest-running first
// cancels executions by the hundred and gains nothing). Once none is queued, the one executing
// longest: a slow or stuck worker's. Before the caller has started
// everything, only one that has waited long in the cluster's queue
// (raceQueued). d.mu is held.
func (d *Dispatcher) nextRace(now time.Time) (int, bool) {
	if !d.drained {
		return d.raceQueued(now)
	}
	if i, ok := d.raceSlowCluster(now); ok {
		return i, true
	}
	for i := len(d.spares) - 1; i >= 0; i-- {
		if !isExecuting(d.spares[i].stage) {
			return i, true
		}
	}
	return 0, true
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
// does on a cluster as fast as this machine, would leave this machine the
// small ones and the link no faster than on this machine alone. An action a worker has run for over
// overdue times its expected time (a stuck or overloaded worker) is raced
// before any, the longest-running first. ok is false until both sides
// have finished an action, or on a cluster as fast as this machine. d.mu
// is held.
func (d *Dispatcher) raceSlowCluster(now time.Time) (i int, ok bool) {
	remote, local := d.paces[remoteSide].per(), d.paces[localSide].per()
	if remote == 0 || local == 0 || remote < slowCluster*local {
		return 0, false
	}
	width := max(d.executingRaces(), 1) // workers running our races
	best, stuck := -1, -1
	var bestGain, stuckFor, ahead float64
	for j, w := range d.spares { // oldest first: the cluster's queue order
		if w.length <= 0 {
			continue // not planned: no length to go by
		}
		ran, expected := executingFor(w.stage, now).Seconds(), remote*w.length
		if ran > overdue*expected {
			if stuck < 0 || ran > stuckFor {
				stuck, stuckFor = j, ran
			}
			continue
		}
		wait := 0.0
		if !isExecuting(w.stage) {
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
