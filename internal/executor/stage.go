package executor

import (
	"context"
	"sync/atomic"
	"time"
)

// remoteStage is what a Race knows of its remote side's progress, shared
// through the contexts of its primary and of its Spare's Wait: whether a
// worker has taken the action yet, and when.
type remoteStage struct {
	since atomic.Int64 // when a worker took the action, in Unix nanoseconds; 0: not yet
}

type remoteStageKey struct{}

func withRemoteStage(ctx context.Context, s *remoteStage) context.Context {
	return context.WithValue(ctx, remoteStageKey{}, s)
}

func remoteStageOf(ctx context.Context) *remoteStage {
	s, _ := ctx.Value(remoteStageKey{}).(*remoteStage)
	return s
}

// Executing tells the race of ctx's action, if any, that a remote worker
// has taken it (stage EXECUTING): until then it only waits in the
// cluster's queue, and a free local slot is better spent on it than on
// one a worker is already running (Hybrid). The first call counts (a
// Hedge's second worker does not restart the clock).
func Executing(ctx context.Context) {
	if s := remoteStageOf(ctx); s != nil {
		s.since.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// RemoteExecuting reports whether the remote side of ctx's race has been
// taken by a worker (Executing): a Spare's Wait gets that context.
func RemoteExecuting(ctx context.Context) bool { return remoteStageOf(ctx).isExecuting() }

// isExecuting reports whether a worker has taken the action (false for a
// nil stage: not a race's).
func (s *remoteStage) isExecuting() bool { return s != nil && s.since.Load() != 0 }

// executingFor is how long a worker has run the action by now (0: none
// has taken it).
func (s *remoteStage) executingFor(now time.Time) time.Duration {
	if s == nil {
		return 0
	}
	if t := s.since.Load(); t != 0 {
		return now.Sub(time.Unix(0, t))
	}
	return 0
}
