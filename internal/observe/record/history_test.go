package record

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// moduleActions makes one action per module in dir, each module's bitcode
// (its only input) of the given size.
func moduleActions(t *testing.T, dir string, sizes map[string]int) []*action.Action {
	t.Helper()
	var as []*action.Action
	for name, size := range sizes {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		as = append(as, &action.Action{ID: name, Dir: dir,
			Args:    []action.Arg{action.Lit("cc"), action.In("", 0), action.Out("-o", 0)},
			Inputs:  []action.Input{{Path: name, Role: action.RoleModule}},
			Outputs: []action.Output{{Path: name + ".native.o"}}})
	}
	return as
}

// TestSchedulingFollowsHistory: with one slot, the scheduler starts the
// modules in the order of their recorded times, not of their sizes; a
// module without history is placed by its size times the time per byte of
// the others; with no history at all the order is by size.
func TestSchedulingFollowsHistory(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int{"big.o": 9000, "templates.o": 1000, "mid.o": 5000, "new.o": 4000}
	s := Open(t.TempDir())
	past := &Run{Schema: Schema, ID: NewID(time.Now().Add(-time.Hour), 1), Dir: dir, LocalCache: true}
	for name, ms := range map[string]int64{"big.o": 100, "templates.o": 900, "mid.o": 300} {
		past.Actions = append(past.Actions, Action{Module: name, Where: WhereLocal, CPU: ms * 1000, Key: "k"})
	}
	if err := s.Write(past); err != nil {
		t.Fatal(err)
	}

	order := func(hist bool) []string {
		as := moduleActions(t, dir, sizes)
		weights := schedule.Weigh(as)
		var expected map[*action.Action]time.Duration
		if hist {
			rec := New(Run{Dir: dir})
			expected = rec.Plan(s, as, weights)
			if n := rec.Snapshot().Ordered; n != 3 {
				t.Errorf("%d actions ordered by history, want 3", n)
			}
		}
		var mu sync.Mutex
		var got []string
		ex := executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
			a, out := j.Action, j.Out
			mu.Lock()
			got = append(got, a.ID)
			mu.Unlock()
			return &executor.Result{}, os.WriteFile(out[0], []byte("x"), 0o644)
		})
		if err := schedule.Run(context.Background(), as, ex, schedule.Options{Parallel: 1, Estimates: schedule.NewEstimates(weights, expected)}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// templates.o: 900 ms; mid.o: 300; new.o: no history, 4000 bytes at
	// (100+900+300 ms)/(9000+1000+5000 bytes) ≈ 347 ms; big.o: 100.
	if got, want := strings.Join(order(true), " "), "templates.o new.o mid.o big.o"; got != want {
		t.Errorf("with history: started %s, want %s", got, want)
	}
	if got, want := strings.Join(order(false), " "), "big.o mid.o new.o templates.o"; got != want {
		t.Errorf("without history: started %s, want %s", got, want)
	}
}

// TestMissReasons explains a miss by the part of the key that changed.
func TestMissReasons(t *testing.T) {
	prev := &Run{ID: "prev", Dir: "/p", LocalCache: true,
		Commands: [][]string{{"clang", "-O2", "<module>", "-o", "<out>"}},
		Contents: map[string]string{"a.o": "1", "lib.a(b.o)": "2", "c.o": "3", "gone.o": "4"}}
	prev.Actions = []Action{
		{Module: "a.o", Key: "ka", Compiler: "c1", Imports: []string{"gone.o", "lib.a(b.o)"}, Index: "i1", Where: WhereLocal},
		{Module: "c.o", Key: "kc", Content: "3", Compiler: "c1", Index: "i3", Where: WhereLocal},
		{Module: "d.o", Key: "kd", Compiler: "c1", Index: "i4", Where: WhereLocal},
		{Module: "e.o", Key: "ke", Compiler: "c1", Index: "i5", Where: WhereLocal},
		{Module: "h.o", Key: "kh", Compiler: "c1", Index: "i6", Order: "o1", Where: WhereLocal},
	}
	h := &History{last: map[string]past{}}
	for i := range prev.Actions {
		h.last[prev.Actions[i].Module] = past{prev, &prev.Actions[i]}
	}
	cur := &Run{ID: "cur", Dir: "/p", LocalCache: true,
		Commands: [][]string{{"clang", "-O2", "<module>", "-o", "<out>"}, {"clang", "-O3", "-g", "<module>", "-o", "<out>"}},
		Contents: map[string]string{"a.o": "1", "lib.a(b.o)": "22", "c.o": "33", "new.o": "5"}}
	cur.Actions = []Action{
		{Module: "a.o", Key: "ka2", Compiler: "c1", Imports: []string{"lib.a(b.o)", "new.o"}, Index: "i1", Where: WhereLocal},
		{Module: "c.o", Key: "kc2", Content: "33", Compiler: "c2", Command: 1, Index: "i3", Where: WhereRemote},
		{Module: "d.o", Key: "kd", Compiler: "c1", Index: "i4", Where: WhereLocal},
		{Module: "e.o", Key: "ke2", Compiler: "c1", Index: "i5b", Where: WhereLocal},
		{Module: "h.o", Key: "kh2", Compiler: "c1", Index: "i6", Order: "o2", Where: WhereLocal},
		{Module: "f.o", Key: "kf", Where: WhereLocal},
		{Module: "g.o", Key: "kg", Where: WhereLocalCache},
	}
	h.Explain(cur)
	want := map[string]string{
		"a.o": "import lib.a(b.o) changed; it imports new.o now; it no longer imports gone.o",
		"c.o": "the compiler changed; flags added: -O3 -g; flags removed: -O2; the module c.o itself changed",
		"d.o": "the key is the same as in run prev: the entry was evicted, the cache was cleared, or the result was not stored",
		"e.o": "its index changed: the thin link decided differently what to import or inline (a module it does not import changed, or a symbol's visibility)",
		"h.o": "the order in which it imports from its modules changed: their paths sort differently",
		"f.o": "first compile of this module that is recorded",
		"g.o": "",
	}
	for _, a := range cur.Actions {
		if got := strings.Join(a.Miss, "; "); got != want[a.Module] {
			t.Errorf("%s: %q\n want %q", a.Module, got, want[a.Module])
		}
	}
	if got := flagDiff([]string{"clang", "-O2", "x"}, []string{"clang", "-O3", "x"}); strings.Join(got, "") != "flag -O3 instead of -O2" {
		t.Errorf("one flag changed: %q", got)
	}
}

// TestHistoryBounded: a module not seen in the directory's last few runs
// counts as new, so that one new module does not make every link read
// every record.
func TestHistoryBounded(t *testing.T) {
	s := Open(t.TempDir())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < historyRuns+1; i++ {
		run := &Run{Schema: Schema, ID: NewID(base.Add(time.Duration(i)*time.Minute), 1), Dir: "/p"}
		m := "recent.o"
		if i == 0 {
			m = "old.o"
		}
		run.Actions = []Action{{Module: m, Where: WhereLocal, CPU: 1000, Key: "k"}}
		if err := s.Write(run); err != nil {
			t.Fatal(err)
		}
	}
	h := s.History("/p", []string{"recent.o", "old.o", "new.o"})
	if _, ok := h.took["recent.o"]; !ok {
		t.Error("recent.o has no history")
	}
	if _, ok := h.took["old.o"]; ok {
		t.Errorf("old.o, last seen %d runs ago, was found: History read beyond %d runs", historyRuns+1, historyRuns)
	}
}

// TestReadAhead: Plan uses the newest record of the directory as
// ReadAhead read it (rewritten since, the file says otherwise), and still
// reads the older ones it needs; a read-ahead of another store is ignored.
func TestReadAhead(t *testing.T) {
	dir := t.TempDir()
	as := moduleActions(t, dir, map[string]int{"a.o": 10, "b.o": 10})
	s := Open(t.TempDir())
	write := func(at time.Time, took map[string]int64) *Run {
		run := &Run{Schema: Schema, ID: NewID(at, 1), Dir: dir}
		for name, ms := range took {
			run.Actions = append(run.Actions, Action{Module: name, Where: WhereLocal, CPU: ms * 1000})
		}
		if err := s.Write(run); err != nil {
			t.Fatal(err)
		}
		return run
	}
	write(time.Now().Add(-2*time.Hour), map[string]int64{"b.o": 70})
	newest := write(time.Now().Add(-time.Hour), map[string]int64{"a.o": 30})

	rec := New(Run{Dir: dir})
	rec.ReadAhead(s)
	<-rec.ahead.done
	// The newest record now says otherwise: Plan must not read it again.
	newest.Actions[0].CPU = 999_000
	if err := s.Write(newest); err != nil {
		t.Fatal(err)
	}
	expected := rec.Plan(s, as, schedule.Weigh(as))
	for _, a := range as {
		want := map[string]time.Duration{"a.o": 30 * time.Millisecond, "b.o": 70 * time.Millisecond}[a.ID]
		if expected[a] != want {
			t.Errorf("%s: expected %v, want %v", a.ID, expected[a], want)
		}
	}

	// Read ahead in another store: Plan reads its own.
	other := New(Run{Dir: dir})
	other.ReadAhead(Open(t.TempDir()))
	as = moduleActions(t, dir, map[string]int{"a.o": 10, "b.o": 10})
	expected = other.Plan(s, as, schedule.Weigh(as))
	for _, a := range as {
		if want := map[string]time.Duration{"a.o": 999 * time.Millisecond, "b.o": 70 * time.Millisecond}[a.ID]; expected[a] != want {
			t.Errorf("read ahead elsewhere: %s: expected %v, want %v", a.ID, expected[a], want)
		}
	}
}

// TestHistoryReadsTheHead: planning reads the compile times at a record's
// head and no further (a record cut short after them still plans); one
// written before records kept them is read whole; the last records are
// read only when a miss is explained.
func TestHistoryReadsTheHead(t *testing.T) {
	s := Open(t.TempDir())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := &Run{Schema: Schema, ID: NewID(base, 1), Dir: "/p",
		Actions: []Action{{Module: "old.o", Where: WhereLocal, CPU: 40_000, Key: "k-old"}}}
	data, err := json.Marshal(old) // as an older thindist wrote it: no times
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, old.ID+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cut := &Run{Schema: Schema, ID: NewID(base.Add(time.Minute), 1), Dir: "/p",
		Actions: []Action{{Module: "new.o", Where: WhereRemote, CPU: 25_000, Key: "k1"}}}
	if err := s.Write(cut); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(s.path(cut))
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.Index(data, []byte(`"times":{"new.o":25000}`))
	if end < 0 {
		t.Fatalf("the record has no times after its dir: %s", data)
	}
	whole := data
	if err := os.WriteFile(s.path(cut), data[:end+len(`"times":{"new.o":25000}`)+1], 0o644); err != nil {
		t.Fatal(err)
	}

	h := s.History("/p", []string{"new.o", "old.o"})
	if h.took["new.o"] != 25*time.Millisecond || h.took["old.o"] != 40*time.Millisecond {
		t.Fatalf("took %v, want new.o 25ms (from the head), old.o 40ms (read whole)", h.took)
	}
	if len(h.last) != 0 {
		t.Errorf("planning read the last records: %v", h.last)
	}

	// A miss is explained from the module's last record, read then.
	if err := os.WriteFile(s.path(cut), whole, 0o644); err != nil {
		t.Fatal(err)
	}
	cur := &Run{ID: "cur", Dir: "/p", Remote: "grpc://x",
		Actions: []Action{{Module: "new.o", Key: "k1", Where: WhereRemote}}}
	h.Explain(cur)
	if got := strings.Join(cur.Actions[0].Miss, "; "); !strings.Contains(got, "the key is the same as in run "+cut.ID) {
		t.Errorf("miss explained as %q, want it found in run %s", got, cut.ID)
	}
}
