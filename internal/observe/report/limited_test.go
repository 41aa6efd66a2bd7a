package report

import (
	"strings"
	"testing"
)

// TestLimitedNeutral: the note that ends a limited series of warnings names
// no kind (it serves remote warnings too).
func TestLimitedNeutral(t *testing.T) {
	var got []string
	w := Limited(func(format string, args ...any) { got = append(got, format) })
	for i := 0; i < 6; i++ {
		w("remote execution failed")
	}
	if len(got) != 4 || strings.Contains(got[3], "cache") {
		t.Errorf("warnings: %q", got)
	}
}
