package record

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
)

// oldRecord is a record as thindist wrote it before results carried a
// typed provenance: how a local compile ran in the forked and worker
// flags, why not on a worker in not_worker, a race in raced.
const oldRecord = `{"schema":1,"id":"20261201-101010.000-42","version":"v0","entry":"dtlto","args":["thindist"],"dir":"/src",
"start":"2026-12-01T10:10:10Z","end":"2026-12-01T10:10:11Z","actions":[
{"module":"exec.o","output":"exec.native.o","size":1,"where":"local","not_worker":"the worker is not tested with -fexperimental","slot":0,"queued_us":0,"start_us":0,"end_us":1,"cpu_us":1,"command":0},
{"module":"fork.o","output":"fork.native.o","size":1,"where":"local","forked":true,"slot":0,"queued_us":0,"start_us":0,"end_us":1,"cpu_us":1,"command":0},
{"module":"worker.o","output":"worker.native.o","size":1,"where":"local","worker":true,"raced":true,"slot":0,"queued_us":0,"start_us":0,"end_us":1,"cpu_us":1,"command":0},
{"module":"remote.o","output":"remote.native.o","size":1,"where":"remote","raced":true,"slot":0,"queued_us":0,"start_us":0,"end_us":1,"cpu_us":1,"command":0},
{"module":"hit.o","output":"hit.native.o","size":1,"where":"cache","slot":0,"queued_us":0,"start_us":0,"end_us":1,"cpu_us":1,"command":0}]}`

// TestOldRecordReads: a record written before still reads, each action
// with the runner, the reason and the race it recorded.
func TestOldRecordReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	if err := os.WriteFile(path, []byte(oldRecord), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		by        proc.RunBy
		notWorker string
		raced     bool
	}{
		{proc.ByExec, "the worker is not tested with -fexperimental", false},
		{proc.ByForkServer, "", false},
		{proc.ByWorker, "", true},
		{proc.ByNone, "", true},
		{proc.ByNone, "", false},
	}
	if len(run.Actions) != len(want) {
		t.Fatalf("%d actions, want %d", len(run.Actions), len(want))
	}
	for i, w := range want {
		a := &run.Actions[i]
		if a.By() != w.by || a.NotWorker != w.notWorker || a.Raced != w.raced {
			t.Errorf("%s: by %v, not on a worker %q, raced %v; want %v, %q, %v", a.Module, a.By(), a.NotWorker, a.Raced, w.by, w.notWorker, w.raced)
		}
	}
}

// TestRecordedProvenance: what the recorder writes of a result's
// provenance is what it always wrote: the same keys, set the same way, so
// that an older thindist reads a newer record.
func TestRecordedProvenance(t *testing.T) {
	for _, c := range []struct {
		module string
		prov   executor.Provenance
		want   string
	}{
		{"exec.o", executor.Provenance{Where: executor.Local, By: proc.ByExec, NotWorker: "why"}, `{"not_worker":"why","where":"local"}`},
		{"fork.o", executor.Provenance{Where: executor.Local, By: proc.ByForkServer}, `{"forked":true,"where":"local"}`},
		{"worker.o", executor.Provenance{Where: executor.Local, By: proc.ByWorker, Race: executor.SecondWon}, `{"raced":true,"where":"local","worker":true}`},
		{"remote.o", executor.Provenance{Where: executor.Remote, Race: executor.FirstWon, Hedge: executor.SecondWon}, `{"raced":true,"where":"remote"}`},
		{"hit.o", executor.Provenance{Where: executor.LocalCache, Replayed: "run 1"}, `{"where":"cache"}`},
	} {
		r := New(Run{Dir: "/src"})
		a := &action.Action{ID: c.module, Dir: "/src", Outputs: []action.Output{{Path: c.module + ".native"}}}
		r.Started(a, 0)
		r.Finished(a, 0, &executor.Result{Provenance: c.prov}, nil)
		run := r.Finish(time.Now(), nil)
		if len(run.Actions) != 1 {
			t.Fatalf("%s: %d actions recorded, want 1", c.module, len(run.Actions))
		}
		data, err := json.Marshal(run.Actions[0])
		if err != nil {
			t.Fatal(err)
		}
		var all map[string]any
		if err := json.Unmarshal(data, &all); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		for _, k := range []string{"where", "forked", "worker", "not_worker", "raced", "hedged", "replayed", "by"} {
			if v, ok := all[k]; ok {
				got[k] = v
			}
		}
		if b, _ := json.Marshal(got); string(b) != c.want {
			t.Errorf("%s: recorded %s, want %s", c.module, b, c.want)
		}
	}
}
