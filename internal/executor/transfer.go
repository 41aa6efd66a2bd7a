package executor

import (
	"context"
	"sync/atomic"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Transfer counts the bytes one action's execution sent to a remote service
// and received from it, whichever executor of the chain moved them: the
// remote cache (a hit's outputs; a result stored), remote execution (its
// inputs, its outputs), and the remote side of a race that lost. It goes
// down the chain as Job.Meter, and the stores and the CAS client below take
// it as an argument of the calls that move bytes. Safe for concurrent use;
// a nil *Transfer counts nothing.
type Transfer struct{ sent, received atomic.Int64 }

// Sent counts n bytes sent for the action.
func (t *Transfer) Sent(n int64) {
	if t != nil {
		t.sent.Add(n)
	}
}

// Received counts n bytes received for the action.
func (t *Transfer) Received(n int64) {
	if t != nil {
		t.received.Add(n)
	}
}

// Metered runs next with a new Transfer as the Job's Meter and reports what
// it counted in the result's BytesUp and BytesDown. A failed execution
// returns no result, so its bytes count in the remote client's totals
// alone.
func Metered(next Executor) Executor { return metered{next} }

type metered struct{ next Executor }

func (m metered) Execute(ctx context.Context, j Job) (*Result, error) {
	t := &Transfer{}
	j.Meter = t
	res, err := m.next.Execute(ctx, j)
	if res != nil {
		res.BytesUp, res.BytesDown = t.sent.Load(), t.received.Load()
	}
	return res, err
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (m metered) Describe() describe.Node { return node("Metered", m.next) }

func (m metered) String() string { return describe.Line(m) }
