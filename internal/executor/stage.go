package executor

import (
	"context"
	"sync/atomic"
	"time"
)

// remoteStage is what a Race knows of its remote side's progress, shared
// through the contexts of its primary and of its Spare's Wait: since when
// the action waits in the cluster's queue, and since when a worker runs it.
type remoteStage struct {
	queued atomic.Int64 // when it was sent for execution, in Unix nanoseconds; 0: not yet
	since  atomic.Int64 // when a worker took it; 0: not yet
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
	now := time.Now().UnixNano()
	eachStage(ctx, func(s *remoteStage) { s.since.CompareAndSwap(0, now) })
}

// Queued tells the race of ctx's action, if any, that its remote side has
// sent it for execution: from now until a worker takes it (Executing) it
// waits in the cluster's queue, where a wait long enough says the cluster
// is narrower than the actions sent to it (Hybrid).
func Queued(ctx context.Context) {
	now := time.Now().UnixNano()
	eachStage(ctx, func(s *remoteStage) { s.queued.CompareAndSwap(0, now) })
}

type remoteStagesKey struct{}

// WithRemoteStagesOf returns ctx carrying the remote stages of the actions
// whose contexts are of, and no other: Queued and Executing on it then
// tell each of their races. A group of actions sent as one execution
// (remote.Grouper) runs on a context of its own, and what the cluster
// reports of it is true of every member.
func WithRemoteStagesOf(ctx context.Context, of ...context.Context) context.Context {
	var ss []*remoteStage
	for _, o := range of {
		if s := remoteStageOf(o); s != nil {
			ss = append(ss, s)
		}
	}
	return context.WithValue(ctx, remoteStagesKey{}, ss)
}

// eachStage calls mark for the stages ctx carries: those of
// WithRemoteStagesOf, else its race's.
func eachStage(ctx context.Context, mark func(*remoteStage)) {
	if ss, ok := ctx.Value(remoteStagesKey{}).([]*remoteStage); ok {
		for _, s := range ss {
			mark(s)
		}
		return
	}
	if s := remoteStageOf(ctx); s != nil {
		mark(s)
	}
}

// RemoteProgress reports when the remote side of ctx's race was sent for
// execution (Queued) and when a worker took it (Executing); zero times
// for what has not happened. A Spare's Wait gets that context.
func RemoteProgress(ctx context.Context) (queued, executing time.Time) {
	s := remoteStageOf(ctx)
	if s == nil {
		return
	}
	return unixTime(s.queued.Load()), unixTime(s.since.Load())
}

// unixTime is the time of a stage's mark, zero for none.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// isExecuting reports whether a worker has taken the action (false for a
// nil stage: not a race's).
func (s *remoteStage) isExecuting() bool { return s != nil && s.since.Load() != 0 }

// executingFor is how long a worker has run the action by now (0: none
// has taken it).
func (s *remoteStage) executingFor(now time.Time) time.Duration {
	if !s.isExecuting() {
		return 0
	}
	return now.Sub(unixTime(s.since.Load()))
}

// sentAt is when the action was sent for execution (zero: not yet, or
// not a race's).
func (s *remoteStage) sentAt() time.Time {
	if s == nil {
		return time.Time{}
	}
	return unixTime(s.queued.Load())
}

// queuedFor is how long the action has waited in the cluster's queue by
// now: 0 if it was not sent yet or a worker has taken it.
func (s *remoteStage) queuedFor(now time.Time) time.Duration {
	if s == nil || s.isExecuting() || s.queued.Load() == 0 {
		return 0
	}
	return now.Sub(unixTime(s.queued.Load()))
}
