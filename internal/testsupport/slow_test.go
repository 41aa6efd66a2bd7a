package testsupport

import "testing"

// TestSlow: under -short a test that calls Slow stops there, skipped; in
// the full tier it goes on.
func TestSlow(t *testing.T) {
	ran := false
	var skipped bool
	t.Run("slow", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Slow(t, "nothing")
		ran = true
	})
	if testing.Short() && (ran || !skipped) {
		t.Errorf("with -short: ran %v, skipped %v; want skipped before the work", ran, skipped)
	}
	if !testing.Short() && (!ran || skipped) {
		t.Errorf("without -short: ran %v, skipped %v; want run", ran, skipped)
	}
}
