package reapi

import (
	"context"

	"github.com/thindist/thindist/internal/action"
)

type shardKey struct{}

type keyedShard struct {
	a     *action.Action
	shard []byte
}

// WithShard returns a context that carries the bytes of a's index shard,
// as read for its cache key (Keyer.KeyShard), down the executor chain to
// the remote executor, which builds a's remote action from them
// (ExecOptions.Shard) instead of reading the file again. A nil shard
// leaves ctx as it is.
func WithShard(ctx context.Context, a *action.Action, shard []byte) context.Context {
	if shard == nil {
		return ctx
	}
	return context.WithValue(ctx, shardKey{}, keyedShard{a, shard})
}

// ShardFrom returns the shard bytes that ctx carries for a (WithShard), or
// nil: none, or another action's (a group's members are built under the
// context of the one that sends them).
func ShardFrom(ctx context.Context, a *action.Action) []byte {
	if s, ok := ctx.Value(shardKey{}).(keyedShard); ok && s.a == a {
		return s.shard
	}
	return nil
}
