package executor

import "testing"

// TestRemoteStagesOf: Queued and Executing on a context made by
// WithRemoteStagesOf mark the stage of every context it was given, and
// not the stage of the context it was made from.
func TestRemoteStagesOf(t *testing.T) {
	a, b, base := new(remoteStage), new(remoteStage), new(remoteStage)
	ctx := WithRemoteStagesOf(withRemoteStage(t.Context(), base),
		withRemoteStage(t.Context(), a), t.Context(), withRemoteStage(t.Context(), b))
	Queued(ctx)
	Executing(ctx)
	for name, s := range map[string]*remoteStage{"a": a, "b": b} {
		if s.queued.Load() == 0 || s.since.Load() == 0 {
			t.Errorf("stage %s: queued %d, executing %d; want both marked", name, s.queued.Load(), s.since.Load())
		}
	}
	if base.queued.Load() != 0 || base.since.Load() != 0 {
		t.Errorf("the stage of the context it was made from was marked")
	}
}
