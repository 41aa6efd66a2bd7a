package executor

import (
	"context"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
)

// HedgeStats are what a Hedge did in a run.
type HedgeStats struct {
	Hedged int64 // actions run twice at once
	Won    int64 // ... whose second execution's result was used
}

// Hedge is the executor NewHedge returns.
type Hedge struct {
	r    *race
	pick func(*action.Action) bool
}

// NewHedge runs each action that pick chooses on primary and second at once
// (a hedged request), and the others on primary alone: for the few long
// actions that bound a link's length, a second worker of a cluster costs
// little, while one slow or failing worker would otherwise hold the
// whole link. The first verified result wins and the other execution is
// cancelled, as in a Race; second writes to private names until it wins.
// Both should be Verified.
func NewHedge(primary, second Executor, pick func(*action.Action) bool) *Hedge {
	return &Hedge{r: &race{primary: primary, secondary: second, spare: pickSpare(pick), suffix: ".hedge", hedge: true}, pick: pick}
}

// Execute implements Executor. An action pick does not choose runs on
// primary as a plain call, in the caller's goroutine: a race around it
// would start a goroutine for the primary and another waiting for a grant
// that never comes, and wake both at its end, for every action of a link
// (most are not hedged).
func (h *Hedge) Execute(ctx context.Context, j Job) (*Result, error) {
	if !h.pick(j.Action) {
		res, err := h.r.primary.Execute(ctx, j)
		if err != nil {
			removeAll(j.Out) // what the primary left, as a race removes it
		}
		return res, err
	}
	return h.r.Execute(ctx, j)
}

// Stats returns the counts of the run so far.
func (h *Hedge) Stats() HedgeStats {
	return HedgeStats{Hedged: h.r.seconds.Load(), Won: h.r.secondWon.Load()}
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (h *Hedge) Describe() describe.Node { return node("Hedge", h.r.primary, h.r.secondary) }

func (h *Hedge) String() string { return describe.Line(h) }

// pickSpare grants a second try at once to the actions it picks, and
// never to others.
type pickSpare func(*action.Action) bool

func (p pickSpare) Wait(ctx context.Context, a *action.Action, _ Progress) (func(), error) {
	if p(a) {
		return func() {}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
