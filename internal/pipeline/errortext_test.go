package pipeline

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorTextRepeats: the same multi-line failure of every action is
// shown in full once, then one line per further action.
func TestErrorTextRepeats(t *testing.T) {
	same := "remote execution: no worker\n  (check --remote-platform)"
	err := errors.Join(errors.New("a.o: "+same), errors.New("b.o: "+same), errors.New("c.o: other"),
		errors.New("d.o: "+same))
	got := errorText(err)
	if n := strings.Count(got, "check --remote-platform"); n != 1 {
		t.Errorf("the details appear %d times, want once:\n%s", n, got)
	}
	for _, id := range []string{"a.o:", "b.o:", "c.o: other", "d.o:"} {
		if !strings.Contains(got, id) {
			t.Errorf("%q is not reported:\n%s", id, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d lines, want 5:\n%s", n+1, got)
	}
}
