package proc

import "testing"

// TestDescribe: Exec ends a runner chain, and says so by name.
func TestDescribe(t *testing.T) {
	if got := Describe(Exec{}); got != "Exec\n" {
		t.Errorf("Describe(Exec{}) = %q, want Exec", got)
	}
}
