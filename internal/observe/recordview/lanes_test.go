package recordview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
)

func act(m, where string, begin, end int64) record.Action {
	return record.Action{Module: m, Where: where, Queued: begin, Begin: begin, End: end, CPU: end - begin}
}

// TestLanesAndCriticalPath: local and remote actions get lanes of their
// own, as many as ran at once; the critical path is the chain that ran
// back to back before the last action to end.
func TestLanesAndCriticalPath(t *testing.T) {
	run := &record.Run{Start: time.Now(), Actions: []record.Action{
		act("a", record.WhereLocal, 0, 100_000),
		act("b", record.WhereLocal, 0, 50_000),
		act("c", record.WhereLocal, 101_000, 300_000), // after a, back to back
		act("d", record.WhereLocal, 50_500, 120_000),  // after b
		act("r1", record.WhereRemote, 0, 80_000),
		act("r2", record.WhereRemoteCache, 10_000, 20_000),
		act("e", record.WhereLocal, 200_000, 210_000), // after d, with a gap
	}}
	lanes := Lanes(run)
	var got []string
	for _, l := range lanes {
		var ms []string
		for _, i := range l.Actions {
			ms = append(ms, run.Actions[i].Module)
		}
		kind := "local"
		if l.Remote {
			kind = "remote"
		}
		got = append(got, kind+":"+strings.Join(ms, ","))
	}
	if want := "local:a,c local:b,d,e remote:r1 remote:r2"; strings.Join(got, " ") != want {
		t.Errorf("lanes %s, want %s", strings.Join(got, " "), want)
	}
	var path []string
	for _, i := range CriticalPath(run, lanes) {
		path = append(path, run.Actions[i].Module)
	}
	if strings.Join(path, ",") != "a,c" {
		t.Errorf("critical path %v, want a,c", path)
	}
}

// TestTextNamesMisses: the terminal summary groups modules by the reason
// they missed.
func TestTextNamesMisses(t *testing.T) {
	run := &record.Run{ID: "x", Start: time.Now(), End: time.Now().Add(time.Second), Jobs: 2, LocalCache: true,
		Actions: []record.Action{
			{Module: "a.o", Where: record.WhereLocal, Miss: []string{"flag -O3 instead of -O2"}, End: 10},
			{Module: "b.o", Where: record.WhereLocal, Miss: []string{"flag -O3 instead of -O2"}, End: 10},
			{Module: "c.o", Where: record.WhereLocalCache, CPU: 5000},
		}}
	var b bytes.Buffer
	WriteText(&b, run)
	if !strings.Contains(b.String(), "flag -O3 instead of -O2: a.o, b.o") ||
		!strings.Contains(b.String(), "3: 1 cached, 0 remote cache, 0 remote, 2 local") {
		t.Errorf("summary:\n%s", b.String())
	}
}
