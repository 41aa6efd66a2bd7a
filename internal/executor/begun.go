package executor

import "context"

type begunKey struct{}

// WithBegun returns a context under which the executor that does an
// action's real work (a remote executor once the inputs are uploaded, the
// local one once its process may start) calls begun, through Begun. The
// scheduler uses it to give the actions that bound a link a head start:
// the rest wait until those have begun, so that the setup of hundreds of
// others (hashing, uploading) does not delay theirs.
func WithBegun(ctx context.Context, begun func()) context.Context {
	return context.WithValue(ctx, begunKey{}, begun)
}

// Begun tells the action of ctx's scheduler that its real work has begun.
// It may be called more than once (a race's two sides).
func Begun(ctx context.Context) {
	if f, _ := ctx.Value(begunKey{}).(func()); f != nil {
		f()
	}
}
