package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestLocalFor: the actions why names run on the local executor, the
// others on next; the note comes once, naming the first and its reason.
func TestLocalFor(t *testing.T) {
	next := returning(&Result{Provenance: Provenance{Where: Remote}}, nil)
	local := returning(&Result{Provenance: Provenance{Where: Local}}, nil)
	var notes []string
	why := func(a *action.Action) string {
		if strings.HasPrefix(a.ID, "temps") {
			return "--save-temps"
		}
		return ""
	}
	l := NewLocalFor(next, local, why, collectWarnings(&notes))
	for _, id := range []string{"a.o", "temps1.o", "b.o", "temps2.o"} {
		res, err := l.Execute(context.Background(), Job{Action: &action.Action{ID: id}})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]Where{true: Local, false: Remote}[why(&action.Action{ID: id}) != ""]; res.Where != want {
			t.Errorf("%s ran %v, want %v", id, res.Where, want)
		}
	}
	if next.calls.Load() != 2 || local.calls.Load() != 2 {
		t.Errorf("next ran %d, local %d; want 2 each", next.calls.Load(), local.calls.Load())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "temps1.o") || !strings.Contains(notes[0], "--save-temps") {
		t.Errorf("notes %q, want one naming temps1.o and --save-temps", notes)
	}
}
