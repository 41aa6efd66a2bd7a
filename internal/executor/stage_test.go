package executor

import "testing"

// TestStages: Queued and Executing on Stages mark every stage of it, skip
// nil ones, and leave other stages alone.
func TestStages(t *testing.T) {
	a, b, other := new(Stage), new(Stage), new(Stage)
	ss := Stages{a, nil, b}
	ss.Queued()
	ss.Executing()
	for name, s := range map[string]*Stage{"a": a, "b": b} {
		if q, e := s.Progress(); q.IsZero() || e.IsZero() {
			t.Errorf("stage %s: queued %v, executing %v; want both marked", name, q, e)
		}
	}
	if q, e := other.Progress(); !q.IsZero() || !e.IsZero() {
		t.Errorf("a stage not in Stages was marked")
	}
}
