package forkserver

import (
	"testing"

	"github.com/thindist/thindist/internal/local/proc"
)

// TestDescribe: a pool's runner names itself and wraps its fallback.
func TestDescribe(t *testing.T) {
	r := NewPool(t.TempDir(), nil, t.Logf).Runner(proc.Exec{}, 0)
	if got, want := proc.Describe(r), "ForkServer\n  Exec\n"; got != want {
		t.Errorf("Describe:\n%s\nwant\n%s", got, want)
	}
}
