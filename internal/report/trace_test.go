package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
)

func TestTracePath(t *testing.T) {
	start := time.Date(2026, 11, 23, 20, 19, 46, 123e6, time.UTC)
	for in, want := range map[string]string{
		"/tmp/t-%p.json":   "/tmp/t-4242.json",
		"t-%t-%p.json":     "t-20261123-201946.123-4242.json",
		"100%%-%x-%":       "100%-%x-%",
		"plain/trace.json": "plain/trace.json",
	} {
		if got := TracePath(in, 4242, start); got != want {
			t.Errorf("TracePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTraceSteps: an executor's steps become spans of their own within the
// action's, on its slot, in the written file.
func TestTraceSteps(t *testing.T) {
	tr := NewTrace()
	a := &action.Action{ID: "m.o", Outputs: []action.Output{{Path: "m.native.o"}}}
	tr.Started(a, 3)
	t0 := time.Now()
	res := &executor.Result{Where: executor.Remote, Steps: []executor.Step{
		{Name: "uploading inputs", Start: t0, End: t0.Add(time.Millisecond)},
		{Name: "executing", Start: t0.Add(time.Millisecond), End: t0.Add(3 * time.Millisecond)},
	}}
	time.Sleep(4 * time.Millisecond)
	tr.Finished(a, 3, res, nil)
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := tr.Write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Name, Ph string
			Tid      int
			Ts, Dur  float64
		}
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	spans := map[string][2]float64{}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" {
			if e.Tid != 3 {
				t.Errorf("%s on thread %d, want the action's slot 3", e.Name, e.Tid)
			}
			spans[e.Name] = [2]float64{e.Ts, e.Ts + e.Dur}
		}
	}
	act, ok := spans["m.o"]
	if !ok || len(spans) != 3 {
		t.Fatalf("spans %v, want the action's and its 2 steps'", spans)
	}
	for _, name := range []string{"uploading inputs", "executing"} {
		s, ok := spans[name]
		if !ok || s[0] < act[0] || s[1] > act[1] || s[1] <= s[0] {
			t.Errorf("step %q at %v, not within the action's span %v", name, s, act)
		}
	}
}
