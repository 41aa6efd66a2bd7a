package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sched/slots"
)

// held is a fake executor whose calls block until released, reporting
// each start on a channel.
type held struct {
	where   executor.Where
	started chan string
	release chan struct{}
}

func newHeld(where executor.Where) *held {
	return &held{where: where, started: make(chan string, 16), release: make(chan struct{})}
}

func (h *held) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	a := j.Action
	h.started <- a.ID
	select {
	case <-h.release:
		return &executor.Result{Provenance: executor.Provenance{Where: h.where}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// byID sends each action to the executor of its ID.
type byID map[string]executor.Executor

func (m byID) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	a, out := j.Action, j.Out
	return m[a.ID].Execute(ctx, executor.Job{Action: a, Out: out})
}

// TestHybridFillsBothSides: this machine's slots fill first, then the
// remote ones; a further action waits for a free slot on either side.
func TestHybridFillsBothSides(t *testing.T) {
	remote, local := newHeld(executor.Remote), newHeld(executor.Local)
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local, Options{RemoteSlots: 2, LocalSlots: 1})
	var wg sync.WaitGroup
	run := func(id string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Execute(t.Context(), executor.Job{Action: &action.Action{ID: id}, Out: nil}); err != nil {
				t.Error(err)
			}
		}()
	}
	run("a")
	if got := <-local.started; got != "a" {
		t.Fatalf("the first action went remote")
	}
	run("b")
	run("c")
	<-remote.started
	<-remote.started
	run("d") // every slot is taken: it waits
	select {
	case id := <-local.started:
		t.Fatalf("%s started locally with every slot taken", id)
	case id := <-remote.started:
		t.Fatalf("%s started remotely with every slot taken", id)
	default:
	}
	local.release <- struct{}{} // "a" ends: "d" takes its local slot
	if got := <-local.started; got != "d" {
		t.Fatalf("%s started locally, want d", got)
	}
	close(local.release)
	close(remote.release)
	wg.Wait()
	if st := h.Stats(); st.Local != 2 || st.Remote != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestHybridRacesOnceDrained: a free local slot goes to a race only once
// the caller has started everything (Drained), and then to the stalled
// remote action.
func TestHybridRacesOnceDrained(t *testing.T) {
	remote := newSide(executor.Remote, "remote")
	remote.hold = make(chan struct{}) // the cluster stalls
	local := newSide(executor.Local, "local")
	// The local slot is busy with an action of its own, "first".
	busy := newHeld(executor.Local)
	h := newHybrid(func(spare executor.Spare) executor.Executor { return executor.Race(remote, local, spare) },
		byID{"first": busy}, Options{RemoteSlots: 4, LocalSlots: 1})
	done := make(chan error, 1)
	go func() {
		_, err := h.Execute(t.Context(), executor.Job{Action: &action.Action{ID: "first"}, Out: nil})
		done <- err
	}()
	<-busy.started
	out := raceOut(t)
	res := make(chan *executor.Result, 1)
	go func() {
		r, err := h.Execute(t.Context(), executor.Job{Action: &action.Action{ID: "m.o"}, Out: out})
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	<-remote.started
	close(busy.release) // the local slot frees, but the caller is not drained
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-local.started:
		t.Fatal("a race started before the caller had started everything")
	default:
	}
	h.d.Drained()
	r := <-res
	if r == nil || r.Where != executor.Local || !r.Race.Twice() {
		t.Fatalf("result %+v, want the local side of a race", r)
	}
	if remote.cancelled.Load() != 1 {
		t.Errorf("the stalled remote side was not cancelled")
	}
	if st := h.Stats(); st.Races != 1 || st.RacesWonHere != 1 {
		t.Errorf("stats %+v", st)
	}
	checkOutputs(t, out, "local", remote, local)
}

// TestHybridStartsInPlanOrder: actions that wait for a slot start in the
// planned order (largest first), not in the order they arrived.
func TestHybridStartsInPlanOrder(t *testing.T) {
	remote := newHeld(executor.Remote)
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, nil, Options{RemoteSlots: 1})
	big, mid, small, first := &action.Action{ID: "big"}, &action.Action{ID: "mid"}, &action.Action{ID: "small"}, &action.Action{ID: "first"}
	h.d.Plan([]*action.Action{first, big, mid, small}, nil)
	var wg sync.WaitGroup
	run := func(a *action.Action) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Execute(t.Context(), executor.Job{Action: a, Out: nil}); err != nil {
				t.Error(err)
			}
		}()
	}
	run(first)
	<-remote.started // holds the only slot
	// The others arrive smallest first, and all wait.
	for _, a := range []*action.Action{small, mid, big} {
		run(a)
		waitQueued(t, h, a)
	}
	var got []string
	for range 4 {
		remote.release <- struct{}{}
		if len(got) < 3 {
			got = append(got, <-remote.started)
		}
	}
	wg.Wait()
	if want := []string{"big", "mid", "small"}; !slices.Equal(got, want) {
		t.Errorf("started %v after the first, want %v", got, want)
	}
}

// waitQueued waits until a waits in h's queue.
func waitQueued(t *testing.T, h *testHybrid, a *action.Action) {
	t.Helper()
	rank := h.d.plan.rank[a]
	for {
		h.d.mu.Lock()
		found := slices.ContainsFunc(h.d.queue, func(w *waiter) bool { return w.Rank == rank })
		h.d.mu.Unlock()
		if found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHybridRacesCriticalAtStart: with races, the cluster's slots are
// taken first; an action long enough to bound the link is raced by a
// local slot at once, before the caller has started everything and while
// other actions still wait; a stalled worker then costs nothing, the
// local run wins and the remote one is cancelled.
func TestHybridRacesCriticalAtStart(t *testing.T) {
	stalled := newSide(executor.Remote, "remote")
	stalled.hold = make(chan struct{}) // the worker stalls on the big one
	other := newHeld(executor.Remote)
	remote := byID{"big": stalled}
	local := newSide(executor.Local, "local")
	local.hold = make(chan struct{}) // until the others wait
	var waiting []*action.Action
	est := newEstimates()
	for _, id := range []string{"s1", "s2", "s3"} {
		remote[id] = other
		waiting = append(waiting, est.weighing(&action.Action{ID: id}, 10))
	}
	big := est.weighing(&action.Action{ID: "big"}, 100)
	localWork := newHeld(executor.Local) // what the local slot takes from the queue
	h := newHybrid(func(spare executor.Spare) executor.Executor { return executor.Race(remote, local, spare) }, localWork,
		Options{RemoteSlots: 2, LocalSlots: 1, Races: true})
	if tiers := h.d.Plan(append([]*action.Action{big}, waiting...), est.of()); fmt.Sprint(tiers) != "[1]" {
		t.Errorf("head start tiers %v, want [1] (big)", tiers)
	}
	if !h.d.plan.critical[big] || len(h.d.plan.critical) != 1 {
		t.Fatalf("critical %v, want big alone", h.d.plan.critical)
	}
	out := raceOut(t)
	res := make(chan *executor.Result, 1)
	go func() {
		r, err := h.Execute(t.Context(), executor.Job{Action: big, Out: out})
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	<-stalled.started // on the cluster first
	// Not drained, nothing else started: the critical race takes this
	// machine's slot at once. (Waited for before the others start, or
	// one of them could take the slot before the race asks for it.)
	<-local.started
	var wg sync.WaitGroup
	for i, a := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Execute(t.Context(), executor.Job{Action: a, Out: nil}); err != nil {
				t.Error(err)
			}
		}()
		if i == 0 {
			<-other.started // s1 takes the other remote slot
		} else {
			waitQueued(t, h, a) // s2 and s3 wait
		}
	}
	close(local.hold) // the others wait while the race runs here
	r := <-res
	if r == nil || r.Where != executor.Local || !r.Race.Twice() {
		t.Fatalf("result %+v, want the local side of a race", r)
	}
	if stalled.cancelled.Load() != 1 {
		t.Errorf("the stalled remote run was not cancelled")
	}
	checkOutputs(t, out, "local", stalled, local)
	// The race's two slots free: s2 and s3 take them, one locally.
	if got := <-localWork.started; got != "s2" && got != "s3" {
		t.Errorf("%s started locally after the race, want s2 or s3", got)
	}
	close(other.release)
	close(localWork.release)
	wg.Wait()
	st := h.Stats()
	if at := h.d.RacedAtStart(); at != 1 || st.Races != 1 || st.RacesWonHere != 1 || st.Remote != 3 || st.Local != 1 {
		t.Errorf("stats %+v, %d raced at start; want 1 race from the start, won here, 3 remote and 1 local start", st, at)
	}
}

// TestCritical: an action is critical when its length is over half of
// max(longest, Σ / slots), by Expected when every action has one, else by
// Weight; at most limit of them.
func TestCritical(t *testing.T) {
	est := newEstimates()
	acts := func(ws ...int64) []*action.Action {
		var as []*action.Action
		for i, w := range ws {
			as = append(as, est.weighing(&action.Action{ID: fmt.Sprint(i)}, w))
		}
		return as
	}
	ids := func(m map[*action.Action]bool) []string {
		var s []string
		for a := range m {
			s = append(s, a.ID)
		}
		slices.Sort(s)
		return s
	}
	for _, c := range []struct {
		name         string
		as           []*action.Action
		slots, limit int
		want         []string
	}{
		{"one long", acts(100, 10, 10, 10), 4, 2, []string{"0"}},
		{"two long", acts(100, 60, 10, 10), 4, 2, []string{"0", "1"}},
		{"limited", acts(100, 90, 80), 4, 2, []string{"0", "1"}},
		{"no local slot", acts(100, 10), 4, 0, nil},
		{"many small on few slots", acts(30, 20, 20, 20, 20, 20, 20, 20, 20, 20), 2, 2, nil},
		{"even", acts(10, 10, 10, 10), 2, 2, nil},
		{"one", acts(5), 4, 2, []string{"0"}},
	} {
		if got := ids(Critical(c.as, est.of(), c.slots, c.limit)); !slices.Equal(got, c.want) {
			t.Errorf("%s: critical %v, want %v", c.name, got, c.want)
		}
	}
	// History overrides size once every action has one.
	as := acts(100, 10, 10)
	for i, d := range []time.Duration{time.Second, 10 * time.Second, time.Second} {
		est.expecting(as[i], d)
	}
	if got := ids(Critical(as, est.of(), 4, 2)); !slices.Equal(got, []string{"1"}) {
		t.Errorf("by history: critical %v, want [1]", got)
	}
}

// TestPlanTwoWorkersWithinBudget: the critical actions run on two workers
// only while their second executions add at most HedgeBudget to the
// link's work: on a long link the largest action does, on a short one it
// does not. The plan is a value of the order alone.
func TestPlanTwoWorkersWithinBudget(t *testing.T) {
	plan := func(small int) (Plan, *action.Action) {
		est := newEstimates()
		big := est.weighing(&action.Action{ID: "big"}, 40)
		order := []*action.Action{big}
		for i := 0; i < small; i++ {
			order = append(order, est.weighing(&action.Action{ID: "s"}, 10))
		}
		return NewPlan(order, est.of(), Options{RemoteSlots: 256, LocalSlots: 2, Races: true}), big
	}
	// 40 of 40 + 1000: under 5%.
	if p, big := plan(100); !p.critical[big] || !p.OnTwoWorkers(big) || len(p.twoWorkers) != 1 {
		t.Errorf("long link: critical %v, on two workers %v; want the big action both, alone", p.critical[big], p.twoWorkers)
	}
	// 40 of 40 + 50: far over.
	if p, big := plan(5); !p.critical[big] || p.OnTwoWorkers(big) {
		t.Errorf("short link: critical %v, on two workers %v; want the big action critical, not on two", p.critical[big], p.OnTwoWorkers(big))
	}
}

// TestHybridHeadArrivesInRank: the head-start actions start together, and
// the largest, whose key takes longest, may reach the Hybrid last; an
// action ranked after it waits for it rather than take the slot it should
// have (here this machine's one, without races). One that ends without
// reaching the Hybrid (a cache hit above it, Ended) releases the others
// too.
func TestHybridHeadArrivesInRank(t *testing.T) {
	for _, arrives := range []bool{true, false} {
		remote, local := newHeld(executor.Remote), newHeld(executor.Local)
		close(remote.release)
		close(local.release)
		h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local, Options{RemoteSlots: 1, LocalSlots: 1})
		est := newEstimates()
		big, mid, small := est.weighing(&action.Action{ID: "big"}, 100), est.weighing(&action.Action{ID: "mid"}, 90), est.weighing(&action.Action{ID: "small"}, 1)
		if tiers := h.d.Plan([]*action.Action{big, mid, small}, est.of()); fmt.Sprint(tiers) != "[2]" {
			t.Fatalf("head start tiers %v, want [2] (big and mid, one tier)", tiers)
		}
		midDone := make(chan *executor.Result, 1)
		go func() {
			res, err := h.Execute(t.Context(), executor.Job{Action: mid, Out: raceOut(t)})
			if err != nil {
				t.Error(err)
			}
			midDone <- res
		}()
		// mid must not start before big has arrived or ended; a start
		// now would show on one side or the other.
		select {
		case id := <-local.started:
			t.Fatalf("arrives=%v: %s started here before big arrived", arrives, id)
		case id := <-remote.started:
			t.Fatalf("arrives=%v: %s started remotely before big arrived", arrives, id)
		case <-time.After(50 * time.Millisecond):
		}
		if !arrives {
			h.d.Ended(big) // served above the Hybrid
			if res := <-midDone; res.Where != executor.Local {
				t.Errorf("mid ran on %v once big ended elsewhere, want here (local first without races)", res.Where)
			}
			continue
		}
		res, err := h.Execute(t.Context(), executor.Job{Action: big, Out: raceOut(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Where != executor.Local {
			t.Errorf("big ran on %v, want this machine's slot, which mid, arriving first, must leave to it", res.Where)
		}
		if r := <-midDone; r.Where != executor.Remote {
			t.Errorf("mid ran on %v, want the remote slot", r.Where)
		}
	}
}

// TestHeadTiers: the head-start actions fall into tiers by how much
// shorter than the longest they are, in eighths of its length.
func TestHeadTiers(t *testing.T) {
	var head []*action.Action
	est := newEstimates()
	for _, w := range []int64{100, 95, 85, 60, 55} {
		head = append(head, est.weighing(&action.Action{}, w))
	}
	length := lengthOf(head, est.of())
	if got := fmt.Sprint(headTiers(head, length)); got != "[2 3 5]" {
		t.Errorf("tiers %s, want [2 3 5]: {100, 95} {85} {60, 55}", got)
	}
	if got := fmt.Sprint(headTiers(head[:1], length)); got != "[1]" {
		t.Errorf("one action: tiers %s, want [1]", got)
	}
	if got := headTiers(nil, length); got != nil {
		t.Errorf("no head: tiers %v, want none", got)
	}
}

// TestHybridRacesQueuedFirst: once drained, a free local slot joins the
// newest race whose remote side no worker has taken yet (the cluster would
// reach it last), and one a worker runs, the longest-running first, only
// when none waits in the cluster's queue.
func TestHybridRacesQueuedFirst(t *testing.T) {
	h, busy := racingHybrid(nil, nil)
	now := time.Now()
	order := raceOrder(t, h, busy, []spareRace{
		{id: "a", since: now.Add(-2 * time.Second)}, // a worker runs a and c
		{id: "b"}, // b and d wait in the cluster's queue
		{id: "c", since: now.Add(-time.Second)},
		{id: "d"},
	})
	if want := []string{"d", "b", "a", "c"}; !slices.Equal(order, want) {
		t.Errorf("races joined in the order %v, want %v", order, want)
	}
}

// TestHybridRacesSlowClusterByGain: once the cluster has been ten times
// slower per unit of length than this machine, a free local slot joins the
// race a local run wins by the most, whether a worker runs it or it waits
// in the queue behind others; a stuck one (run for over twice its expected
// time) first. On a cluster as fast as this machine the queue's order
// holds.
func TestHybridRacesSlowClusterByGain(t *testing.T) {
	actions := map[string]*action.Action{}
	var plan []*action.Action
	est := newEstimates()
	for _, x := range []struct {
		id     string
		weight int64
	}{{"first", 200}, {"big", 100}, {"mid", 50}, {"small", 10}, {"stuck", 10}} {
		a := est.weighing(&action.Action{ID: x.id}, x.weight)
		actions[x.id] = a
		plan = append(plan, a)
	}
	now := time.Now()
	spares := []spareRace{
		{id: "stuck", since: now.Add(-5 * time.Second)}, // expected 1 s there
		{id: "big", since: now.Add(-2 * time.Second)},   // 10 - 2 - 1 = 7 s gained
		// Queued, and once big is raced, with no worker running the
		// others: mid gains 5 - 0.5 = 4.5 s, small, which waits for mid,
		// 5 + 1 - 0.1 = 5.9 s.
		{id: "mid"},
		{id: "small"},
	}
	for _, c := range []struct {
		name   string
		remote time.Duration // a worker's time for an action of weight 100
		want   []string
	}{
		{"slow cluster", 10 * time.Second, []string{"stuck", "big", "small", "mid"}},
		{"fast cluster", time.Second, []string{"small", "mid", "stuck", "big"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, busy := racingHybrid(plan, est.of())
			// One action each way has finished: a compile here of weight
			// 100 in 1 s, a worker's of weight 100 in c.remote.
			h.d.Ran(actions["big"], &executor.Result{Provenance: executor.Provenance{Where: executor.Local}, Wall: time.Second})
			h.d.Ran(actions["big"], &executor.Result{Provenance: executor.Provenance{Where: executor.Remote}, Wall: time.Hour, Steps: []executor.Step{
				{Kind: executor.StepQueued, Start: now, End: now.Add(time.Hour)},
				{Kind: executor.StepExecuting, Start: now, End: now.Add(c.remote)}}})
			h.d.Ran(actions["big"], &executor.Result{Provenance: executor.Provenance{Where: executor.RemoteCache}, Wall: time.Hour}) // ran nowhere
			for i := range spares {
				spares[i].action = actions[spares[i].id]
			}
			if order := raceOrder(t, h, busy, spares); !slices.Equal(order, c.want) {
				t.Errorf("races joined in the order %v, want %v", order, c.want)
			}
		})
	}
}

// racingHybrid returns a Hybrid with four remote slots and one local one,
// planned with plan if any, and the held executor that will take its
// local slot. (It races without Options.Races: that only adds the races
// of critical actions, granted first.)
func racingHybrid(plan []*action.Action, est *schedule.Estimates) (*testHybrid, *held) {
	busy := newHeld(executor.Local)
	h := newHybrid(func(executor.Spare) executor.Executor { return newHeld(executor.Remote) }, byID{"first": busy},
		Options{RemoteSlots: 4, LocalSlots: 1})
	if plan != nil {
		h.d.Plan(plan, est)
	}
	return h, busy
}

// spareRace is a race waiting for a local slot: its action (an unplanned
// one named id if nil), and since when a worker has run its remote side
// (zero: still queued).
type spareRace struct {
	id     string
	action *action.Action
	since  time.Time
}

// raceOrder takes h's one local slot with an action "first" held by busy,
// drains h, has each spare wait for a slot in turn, then frees the slot
// and returns the order in which the spares got it.
func raceOrder(t *testing.T, h *testHybrid, busy *held, spares []spareRace) []string {
	t.Helper()
	first := &action.Action{ID: "first"}
	for a := range h.d.plan.rank {
		if a.ID == "first" {
			first = a
		}
	}
	go h.Execute(t.Context(), executor.Job{Action: first, Out: nil})
	<-busy.started // the one local slot is taken
	h.d.Drained()
	type grant struct {
		id      string
		release func()
	}
	granted := make(chan grant, len(spares))
	for i, sp := range spares {
		st := fixedStage{executing: sp.since}
		a := sp.action
		if a == nil {
			a = &action.Action{ID: sp.id}
		}
		go func() {
			release, err := h.d.Wait(t.Context(), a, st)
			if err != nil {
				t.Error(err)
				return
			}
			granted <- grant{a.ID, release}
		}()
		waitSpares(t, h, i+1) // in arrival order
	}
	close(busy.release)
	var order []string
	for range spares {
		g := <-granted
		order = append(order, g.id)
		g.release() // the race is over; the slot goes to the next
	}
	return order
}

// TestHybridRacesLongQueuedBeforeDrained: before the caller has started
// everything, a free local slot joins a race whose remote side has waited
// queuedLong in the cluster's queue, at once if it has, by a timer when
// it will have; not one a worker runs, nor one not yet sent.
func TestHybridRacesLongQueuedBeforeDrained(t *testing.T) {
	h := newHybrid(func(executor.Spare) executor.Executor { return newHeld(executor.Remote) }, newHeld(executor.Local),
		Options{RemoteSlots: 4, LocalSlots: 3})
	now := time.Now()
	granted := make(chan string, 4)
	wait := func(id string, queued, executing time.Time) {
		st := staged(queued, executing)
		go func() {
			if _, err := h.d.Wait(t.Context(), &action.Action{ID: id}, st); err == nil {
				granted <- id
			}
		}()
	}
	wait("running", now.Add(-2*time.Second), now.Add(-time.Second))
	wait("unsent", time.Time{}, time.Time{})
	wait("waiting", now.Add(-time.Second), time.Time{})
	next := func() string {
		select {
		case id := <-granted:
			return id
		case <-time.After(10 * time.Second):
			return "none"
		}
	}
	if id := next(); id != "waiting" {
		t.Fatalf("%s joined first, want the one long in the queue", id)
	}
	sent := time.Now()
	wait("fresh", sent, time.Time{})
	if id := next(); id != "fresh" {
		t.Fatalf("%s joined, want fresh (once a timer wakes the Hybrid)", id)
	}
	if d := time.Since(sent); d < queuedLong {
		t.Errorf("fresh joined after %v in the queue, before %v", d, queuedLong)
	}
	select {
	case id := <-granted:
		t.Fatalf("%s joined before the caller was drained", id)
	case <-time.After(2 * queuedLong):
	}
	h.d.Drained() // now the last local slot joins one of the others
	if id := next(); id != "unsent" && id != "running" {
		t.Fatalf("%s joined after draining", id)
	}
}

// TestHybridBackloggedStartsHere: with races, an action to start goes to
// the cluster while its queue moves, and, once a remote action has waited
// queuedLong there, to this machine's slot instead, waiting for it if it
// is busy.
func TestHybridBackloggedStartsHere(t *testing.T) {
	remote, local := newHeld(executor.Remote), newHeld(executor.Local)
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local,
		Options{RemoteSlots: 4, LocalSlots: 1, Races: true})
	now := time.Now()
	releases := make(chan func(), 4)
	wait := func(id string, queued, executing time.Time) {
		st := staged(queued, executing)
		go func() {
			if release, err := h.d.Wait(t.Context(), &action.Action{ID: id}, st); err == nil {
				releases <- release
			}
		}()
	}
	start := func(id string) {
		go h.Execute(t.Context(), executor.Job{Action: &action.Action{ID: id}, Out: nil})
	}
	wait("running", now.Add(-time.Second), now) // a worker runs it
	start("first")
	if id := <-remote.started; id != "first" {
		t.Fatalf("%s started remotely, want first", id)
	}
	if backlogged(h) {
		t.Fatal("backlogged with nothing in the cluster's queue")
	}
	wait("long1", now.Add(-time.Second), time.Time{})
	wait("long2", now.Add(-time.Second), time.Time{})
	release := <-releases // one of them races on the local slot
	waitSpares(t, h, 2)   // the other waits, with running
	if !backlogged(h) {
		t.Fatal("not backlogged with an action long in the cluster's queue")
	}
	start("b")
	expectNoStart(t, remote, local, 3*queuedLong, "the cluster is backlogged and the local slot races")
	release()
	expectStart(t, "b", local, remote)
}

// TestHybridBackloggedSendsBetterRanked: under a backlog, an action ranked
// before one in the cluster's queue is still sent there (the cluster
// serves it first, by priority), while one ranked after every queued
// action waits for this machine's slot.
func TestHybridBackloggedSendsBetterRanked(t *testing.T) {
	remote, local := newHeld(executor.Remote), newHeld(executor.Local)
	h := newHybrid(func(executor.Spare) executor.Executor { return remote }, local,
		Options{RemoteSlots: 8, LocalSlots: 1, Races: true})
	acts := map[string]*action.Action{}
	var order []*action.Action
	est := newEstimates()
	for _, id := range []string{"critical", "run", "better", "raced", "queued", "worse"} {
		acts[id] = est.weighing(&action.Action{ID: id}, 100)
		order = append(order, acts[id])
	}
	h.d.Plan(order, est.of())
	now := time.Now()
	releases := make(chan func(), 4)
	wait := func(id string, queued, executing time.Time) {
		st := staged(queued, executing)
		go func() {
			if release, err := h.d.Wait(t.Context(), acts[id], st); err == nil {
				releases <- release
			}
		}()
	}
	wait("run", now.Add(-time.Second), now)
	wait("raced", now.Add(-time.Second), time.Time{})
	release := <-releases // it races on the local slot, and keeps it
	waitSpares(t, h, 1)
	wait("queued", now.Add(-time.Second), time.Time{})
	waitSpares(t, h, 2)
	if !backlogged(h) {
		t.Fatal("not backlogged with an action long in the cluster's queue")
	}
	go h.Execute(t.Context(), executor.Job{Action: acts["worse"], Out: nil})
	expectNoStart(t, remote, local, 3*queuedLong, "ranked after every action in the backlogged cluster's queue, the local slot racing")
	go h.Execute(t.Context(), executor.Job{Action: acts["better"], Out: nil})
	expectStart(t, "better", remote, local) // ranked before one in the cluster's queue
	release()
	expectStart(t, "worse", local, remote)
}

// waitSpares waits until n races wait for a local slot.
func waitSpares(t *testing.T, h *testHybrid, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h.d.mu.Lock()
		got := len(h.d.spares)
		h.d.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d races wait, want %d", got, n)
		}
	}
}

// expectStart fails unless want starts on side (and nothing on other)
// within 10 s.
func expectStart(t *testing.T, want string, side, other *held) {
	t.Helper()
	select {
	case id := <-side.started:
		if id != want {
			t.Fatalf("%s started %s, want %s", id, side.where, want)
		}
	case id := <-other.started:
		t.Fatalf("%s started %s, want %s %s", id, other.where, want, side.where)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never started %s", want, side.where)
	}
}

// expectNoStart fails if anything starts on remote or local within d.
func expectNoStart(t *testing.T, remote, local *held, d time.Duration, why string) {
	t.Helper()
	select {
	case id := <-remote.started:
		t.Fatalf("%s started remotely: %s", id, why)
	case id := <-local.started:
		t.Fatalf("%s started here: %s", id, why)
	case <-time.After(d):
	}
}

func backlogged(h *testHybrid) bool {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.d.backlogged(time.Now())
}

// staged is the progress of a race whose remote side was sent for
// execution at queued and taken by a worker at executing (zero: not yet).
func staged(queued, executing time.Time) executor.Progress {
	return fixedStage{queued, executing}
}

// TestHybridCriticalRaceWaitsForWidth: a critical action's race starts at
// once on a cluster seen running more actions than this machine has slots;
// on one backlogged with no more running, where the race would hold a
// local slot for the action's whole length while the cluster runs it
// anyway, it is raced as any other; a server that reports no worker
// taking anything is not waited for longer than criticalWait.
func TestHybridCriticalRaceWaitsForWidth(t *testing.T) {
	start := time.Now()
	stage := func(executing bool) executor.Progress {
		st := fixedStage{queued: start}
		if executing {
			st.executing = start
		}
		return st
	}
	cases := []struct {
		name                 string
		executing, queued    int // the other races' remote sides
		critExecuting        bool
		after                time.Duration
		wantRace, wantCritic bool
	}{
		{"wide, at once", 2, 5, true, 0, true, true},
		{"not backlogged yet", 0, 5, true, queuedLong / 2, false, true},
		{"narrow: backlogged, one running", 0, 5, true, queuedLong, false, false},
		{"no stages reported, after the wait", 0, 5, false, criticalWait, true, true},
		{"nothing else sent, after the wait", 0, 0, true, criticalWait, true, true},
	}
	// The wait runs from when the critical action was sent: its own upload
	// may take longer than criticalWait. Not sent after criticalUpload, it
	// is raced.
	unsent := func() executor.Progress { return fixedStage{} }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHybrid(func(executor.Spare) executor.Executor { return newHeld(executor.Remote) }, newHeld(executor.Local),
				Options{RemoteSlots: 8, LocalSlots: 1, Races: true})
			crit := &waiter{critical: true, since: start, stage: stage(c.critExecuting), Waiter: slots.NewWaiter(0)}
			h.d.spares = append(h.d.spares, crit)
			for i := 0; i < c.executing+c.queued; i++ {
				h.d.spares = append(h.d.spares, &waiter{since: start, stage: stage(i < c.executing), Waiter: slots.NewWaiter(0)})
			}
			h.d.mu.Lock()
			got := h.d.raceAtStart(crit, start.Add(c.after))
			if h.d.wake != nil {
				h.d.wake.Stop()
			}
			h.d.mu.Unlock()
			if got != c.wantRace || crit.critical != c.wantCritic {
				t.Errorf("race now %v, still critical %v; want %v, %v", got, crit.critical, c.wantRace, c.wantCritic)
			}
		})
	}
	for _, c := range []struct {
		after    time.Duration
		wantRace bool
	}{{criticalWait, false}, {criticalUpload, true}} {
		h := newHybrid(func(executor.Spare) executor.Executor { return newHeld(executor.Remote) }, newHeld(executor.Local),
			Options{RemoteSlots: 8, LocalSlots: 1, Races: true})
		crit := &waiter{critical: true, since: start, stage: unsent(), Waiter: slots.NewWaiter(0)}
		h.d.spares = append(h.d.spares, crit)
		h.d.mu.Lock()
		got := h.d.raceAtStart(crit, start.Add(c.after))
		if h.d.wake != nil {
			h.d.wake.Stop()
		}
		h.d.mu.Unlock()
		if got != c.wantRace {
			t.Errorf("not yet sent, %v after its race began to wait: race now %v, want %v", c.after, got, c.wantRace)
		}
	}
}

// newHybrid builds a Hybrid as the pipeline does: its Dispatcher first,
// on this machine's process slots (as many as o's local slots), then the
// remote side from it (which may race on the Dispatcher's spare local
// slots).
func newHybrid(remote func(executor.Spare) executor.Executor, local executor.Executor, o Options) *testHybrid {
	d := NewDispatcher(o, Processes{Slots: slots.NewPool(o.LocalSlots)})
	return &testHybrid{executor.NewHybrid(d, remote(d), local), d}
}

// testHybrid is a Hybrid and its Dispatcher, whose state the tests read.
type testHybrid struct {
	*executor.Hybrid
	d *Dispatcher
}
