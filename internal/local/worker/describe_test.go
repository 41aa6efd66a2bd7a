package worker

import (
	"context"
	"testing"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/describe"
)

// next is a runner that only describes itself.
type next struct{}

func (next) Run(context.Context, *proc.Cmd) (*proc.Result, error) { return nil, nil }
func (next) Describe() describe.Node                              { return describe.Node{Name: "Next"} }

// TestDescribe: a worker runner wraps, in this order, its workers, the
// runner of the jobs they do not take and the one that reruns a job.
func TestDescribe(t *testing.T) {
	r := NewRunner(next{}, proc.Exec{}, Options{Path: "thindist-worker"})
	want := "Worker\n  WorkerPool\n  Next\n  Exec\n"
	if got := proc.Describe(r); got != want {
		t.Errorf("Describe:\n%s\nwant\n%s", got, want)
	}
}
