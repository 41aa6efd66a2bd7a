package schedule

import (
	"os"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// Estimates are what the scheduler knows of a run's actions before it
// runs them: each module's size (its weight) and, from earlier runs, how
// long each is expected to take. They are the scheduler's, kept beside
// the actions, which stay as their job source made them. A value made
// once (NewEstimates) and never changed: safe to read from any goroutine.
// A nil *Estimates knows nothing (zeros), and orders by nothing.
type Estimates struct {
	weight   map[*action.Action]int64
	expected map[*action.Action]time.Duration
}

// NewEstimates returns the estimates of weights (Weigh) and expected
// times (nil: no history).
func NewEstimates(weights map[*action.Action]int64, expected map[*action.Action]time.Duration) *Estimates {
	return &Estimates{weight: weights, expected: expected}
}

// Weight is a's module's bitcode size, 0 if unknown. It orders the work
// (largest first) when the expected times do not.
func (e *Estimates) Weight(a *action.Action) int64 {
	if e == nil {
		return 0
	}
	return e.weight[a]
}

// Expected is how long a's backend is expected to take, from earlier
// runs' records; 0 when unknown. When set it orders the work before the
// weight does (Precedes).
func (e *Estimates) Expected(a *action.Action) time.Duration {
	if e == nil {
		return 0
	}
	return e.expected[a]
}

// Precedes reports whether a should start before b: the longer expected
// first, and between equal expectations (none recorded) the larger module.
func (e *Estimates) Precedes(a, b *action.Action) bool {
	if ea, eb := e.Expected(a), e.Expected(b); ea != eb {
		return ea > eb
	}
	return e.Weight(a) > e.Weight(b)
}

// Weigh reads the size of each action's module, once: the one read of
// the sizes in a run, for the history's expectations and the order
// alike. A module whose file shows no size weighs what its job source
// said (Action.ModuleSize), one it cannot read 0 (Preflight says why).
func Weigh(actions []*action.Action) map[*action.Action]int64 {
	w := make(map[*action.Action]int64, len(actions))
	for _, a := range actions {
		if a.ModuleSize > 0 {
			w[a] = a.ModuleSize
		}
		for _, in := range a.Inputs {
			if in.Role != action.RoleModule {
				continue
			}
			if fi, err := os.Stat(a.Abs(in.Local())); err == nil && !fi.IsDir() && fi.Size() > 0 {
				w[a] = fi.Size()
			}
		}
	}
	return w
}
