package schedule

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// TestEstimates: Weigh reads each module's size, falling back to what the
// job source said where the file shows none (a FIFO) and leaving the
// action as it was; Precedes puts the longer expected first, then the
// larger; a nil Estimates knows nothing.
func TestEstimates(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.o"), make([]byte, 300), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.o"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mod := func(name string, said int64) *action.Action {
		return &action.Action{ID: name, Dir: dir, ModuleSize: said, Inputs: []action.Input{{Path: name, Role: action.RoleModule}}}
	}
	big, empty, said := mod("big.o", 0), mod("empty.o", 0), mod("empty.o", 50)
	w := Weigh([]*action.Action{big, empty, said})
	if w[big] != 300 || w[empty] != 0 || w[said] != 50 || said.ModuleSize != 50 {
		t.Errorf("weights %d %d %d, want 300 0 50", w[big], w[empty], w[said])
	}
	est := NewEstimates(w, map[*action.Action]time.Duration{empty: time.Second})
	if !est.Precedes(empty, big) || !est.Precedes(big, said) || est.Precedes(said, big) {
		t.Error("want the expected one first, then by weight")
	}
	var none *Estimates
	if none.Weight(big) != 0 || none.Expected(big) != 0 || none.Precedes(big, said) {
		t.Error("a nil Estimates knows something")
	}
}
