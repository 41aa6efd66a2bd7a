package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
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
	res := &executor.Result{Provenance: executor.Provenance{Where: executor.Remote}, Steps: []executor.Step{
		{Kind: executor.StepUploadingInputs, Start: t0, End: t0.Add(time.Millisecond)},
		{Kind: executor.StepExecuting, Start: t0.Add(time.Millisecond), End: t0.Add(3 * time.Millisecond)},
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

// TestEncodeTraceIsJSON: the hand-written encoding of a trace is byte for
// byte what encoding/json gives, whatever the names, numbers and
// arguments.
func TestEncodeTraceIsJSON(t *testing.T) {
	events := []traceEvent{
		{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "thindist"}},
		{Name: "b/c/Bench.o", Cat: "remote", Ph: "X", Ts: 13306.392, Dur: 2002489.512, Pid: 1, Tid: 128,
			Args: map[string]any{"bytes": int64(451060), "cpu_ms": int64(1545), "forked": true, "module": "b/c/Bench.o", "n": 3, "ratio": 0.25}},
		{Name: "quote \" back\\slash <tag> & tab\t nul\x00 é ü 字 \xff", Ph: "X", Ts: 0, Dur: 1e-7, Tid: 2,
			Args: map[string]any{"error": "line1\nline2 \u2028", "html": "<a & b>", "z": nil, "list": []string{"a"}}},
		{Name: "big", Ph: "X", Ts: 1e21, Dur: 123456789012.5, Tid: 3},
		{Name: "tiny", Ph: "X", Ts: 0.000001, Dur: 0.5},
	}
	for _, meta := range []map[string]any{nil, {"command": "ld.lld -o a.out", "messages": []string{"x"}}} {
		got, err := encodeTrace(events, meta)
		if err != nil {
			t.Fatal(err)
		}
		file := map[string]any{"traceEvents": events, "displayTimeUnit": "ms"}
		if meta != nil {
			file["otherData"] = meta
		}
		want, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("meta %v:\n got  %s\n want %s", meta, got, want)
		}
	}
}

// TestTraceProvenance: a result's provenance shows in its span's
// arguments as it always has: "forked" for a compiler forked from a fork
// server (not for one exec'd or run on a worker), "raced" and "hedged"
// naming the winner.
func TestTraceProvenance(t *testing.T) {
	tr := NewTrace()
	for _, c := range []executor.Provenance{
		{Where: executor.Local, By: proc.ByExec},
		{Where: executor.Local, By: proc.ByForkServer},
		{Where: executor.Local, By: proc.ByWorker, Race: executor.SecondWon},
		{Where: executor.Remote, Race: executor.FirstWon, Hedge: executor.FirstWon},
		{Where: executor.Remote, Hedge: executor.SecondWon},
	} {
		a := &action.Action{ID: fmt.Sprint(len(tr.events)), Outputs: []action.Output{{Path: "m.native.o"}}}
		tr.Started(a, 0)
		tr.Finished(a, 0, &executor.Result{Provenance: c}, nil)
	}
	want := []map[string]any{
		{},
		{"forked": true},
		{"raced": "won by local"},
		{"raced": "won by remote", "hedged": "won by the first execution"},
		{"hedged": "won by the second execution"},
	}
	for i, e := range tr.events {
		got := map[string]any{}
		for _, k := range []string{"forked", "raced", "hedged"} {
			if v, ok := e.Args[k]; ok {
				got[k] = v
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("span %d: %v, want %v", i, got, want[i])
		}
	}
}
