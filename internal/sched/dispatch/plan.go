package dispatch

import (
	"math"
	"sort"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// Plan is what a Hybrid knows of a run's actions before the first starts,
// computed once from the order the scheduler will start them in
// (NewPlan): each action's rank, its length, the critical actions (raced
// from the start), those also run on two workers at once (Hedge), and the
// head start's tiers (schedule.Planner). It is a value: nothing in it changes once
// made.
type Plan struct {
	rank       map[*action.Action]int
	critical   map[*action.Action]bool
	twoWorkers map[*action.Action]bool
	est        *schedule.Estimates          // what the order was made by
	length     func(*action.Action) float64 // lengthOf the planned actions
	head       int                          // order[:head] get a head start
	tiers      []int
}

// NewPlan plans order for a Hybrid of o's slots. The long actions at the
// head of the order (Critical without a limit) get a head start: on a
// cluster wide enough for the link's length to be theirs, their inputs are
// then hashed and uploaded before hundreds of others compete with them for
// this machine's CPU and the link. They start in tiers of length
// (headTiers). With races (o.Races), the critical actions are marked, and
// those of them within HedgeBudget run on two workers (OnTwoWorkers).
func NewPlan(order []*action.Action, est *schedule.Estimates, o Options) Plan {
	p := Plan{rank: make(map[*action.Action]int, len(order)), est: est, length: lengthOf(order, est)}
	for i, a := range order {
		p.rank[a] = i
	}
	if o.Races {
		// At least one: with no local slot it may still run on a second
		// worker (OnTwoWorkers).
		p.critical = Critical(order, est, o.RemoteSlots+o.LocalSlots, max(o.LocalSlots, 1))
		p.twoWorkers = withinBudget(order, est, p.critical, HedgeBudget)
	}
	long := Critical(order, est, o.RemoteSlots+o.LocalSlots, len(order))
	for p.head < len(order) && long[order[p.head]] {
		p.head++
	}
	if p.head == len(order) {
		p.head = 0 // all of them: nothing to wait for
	}
	p.tiers = headTiers(order[:p.head], p.length)
	return p
}

// Tiers are the head start's tiers (schedule.Planner.Plan).
func (p Plan) Tiers() []int { return p.tiers }

// OnTwoWorkers reports whether a should run on a second worker as well
// (Hedge): it is critical (with races) and, with the critical actions
// longer than it, no more than HedgeBudget of the link's work.
func (p Plan) OnTwoWorkers(a *action.Action) bool { return p.twoWorkers[a] }

// headTierWidth is the share of the longest action's length that the
// actions of one head-start tier span.
const headTierWidth = 1.0 / 8

// headTiers splits the head-start actions (longest first) into tiers for
// the scheduler (schedule.Planner.Plan): an action a fraction f shorter than the
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

// HedgeBudget is the share of a link's work (Σ lengths) that hedges may
// add: a second execution of the critical actions pays on a link of
// hundreds of actions, where the longest few are a small part of the
// work and alone bound its length, not on a link of a few actions, where
// the longest is a large part of the work and a second run of it adds as
// much again.
const HedgeBudget = 0.05

// withinBudget returns the longest of the chosen actions whose lengths
// (as Critical measures them) add up to at most budget × the sum over
// all actions.
func withinBudget(actions []*action.Action, est *schedule.Estimates, chosen map[*action.Action]bool, budget float64) map[*action.Action]bool {
	length := lengthOf(actions, est)
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

// lengthOf returns how Critical measures an action: its expected time
// when every action has one (history), else its weight (module size), as
// est has them.
func lengthOf(actions []*action.Action, est *schedule.Estimates) func(*action.Action) float64 {
	timed := true
	for _, a := range actions {
		timed = timed && est.Expected(a) > 0
	}
	return func(a *action.Action) float64 {
		if timed {
			return float64(est.Expected(a))
		}
		return float64(est.Weight(a))
	}
}

// Critical returns the actions, at most limit of them, whose length alone
// is over half the makespan expected on slots slots: max(longest,
// Σ lengths / slots). Lengths are the actions' expected times when every
// action has one (history), else their weights (module size), which is
// what orders them (est).
func Critical(actions []*action.Action, est *schedule.Estimates, slots, limit int) map[*action.Action]bool {
	if limit <= 0 || len(actions) == 0 {
		return nil
	}
	length := lengthOf(actions, est)
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
