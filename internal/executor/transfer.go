package executor

import (
	"context"
	"sync/atomic"
)

// Transfer counts the bytes one action's execution sent to a remote service
// and received from it, whichever executor of the chain moved them: the
// remote cache (a hit's outputs; a result stored), remote execution (its
// inputs, its outputs), and the remote side of a race that lost. Safe for
// concurrent use.
type Transfer struct{ sent, received atomic.Int64 }

type transferKey struct{}

// WithTransfer returns a context whose remote calls count their bytes in t.
// The counter travels with the context, as the slot observer does, because
// the bytes move deep in the executor chain and not only for the result
// that is returned (a race's loser uploads too).
func WithTransfer(ctx context.Context, t *Transfer) context.Context {
	return context.WithValue(ctx, transferKey{}, t)
}

// Sent counts n bytes sent for the action of ctx, if it has a Transfer.
func Sent(ctx context.Context, n int64) {
	if t, _ := ctx.Value(transferKey{}).(*Transfer); t != nil {
		t.sent.Add(n)
	}
}

// Received counts n bytes received for the action of ctx, if it has a
// Transfer.
func Received(ctx context.Context, n int64) {
	if t, _ := ctx.Value(transferKey{}).(*Transfer); t != nil {
		t.received.Add(n)
	}
}

// Metered runs next with a Transfer in the context and reports what it
// counted in the result's BytesUp and BytesDown. A failed execution
// returns no result, so its bytes count in the remote client's totals
// alone.
func Metered(next Executor) Executor { return metered{next} }

type metered struct{ next Executor }

func (m metered) Execute(ctx context.Context, j Job) (*Result, error) {
	t := &Transfer{}
	res, err := m.next.Execute(WithTransfer(ctx, t), j)
	if res != nil {
		res.BytesUp, res.BytesDown = t.sent.Load(), t.received.Load()
	}
	return res, err
}

func (m metered) String() string { return wraps("Metered", m.next) }
