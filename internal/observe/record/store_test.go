package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bigRun is a run whose record is large enough (about 1 MiB) that a torn
// write would be seen.
func bigRun(id string, n int) *Run {
	run := &Run{Schema: Schema, ID: id, Dir: "/src", Start: time.Now(), End: time.Now(), Output: "app-" + id,
		Contents: map[string]string{}}
	for i := 0; i < n; i++ {
		m := fmt.Sprintf("obj/module%05d.o", i)
		run.Actions = append(run.Actions, Action{Module: m, Where: WhereLocal, Key: strings.Repeat("ab", 32),
			Imports: []string{"obj/a.o", "obj/b.o"}, CPU: int64(i)})
		run.Contents[m] = strings.Repeat("cd", 32)
	}
	return run
}

// TestMain lets the concurrency test run this binary as separate writer
// processes, as concurrent links are.
func TestMain(m *testing.M) {
	if dir := os.Getenv("RECORD_TEST_WRITER"); dir != "" {
		// Each writer writes its record several times over (a link
		// writes it once), to give a reader many chances to catch one
		// half written.
		id := os.Getenv("RECORD_TEST_ID")
		run := bigRun(id, 4000)
		s := Open(dir)
		for i := 0; i < 5; i++ {
			if err := s.Write(run); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		if err := s.AddTotals(run); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConcurrentWriters runs 8 writer processes at once on one store while
// this one reads every record it lists: every record read is whole, all 8
// are kept, and the totals count all 8 (their updates are serialised).
func TestConcurrentWriters(t *testing.T) {
	cache := t.TempDir()
	s := Open(cache)
	const n = 8
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RECORD_TEST_WRITER="+cache, "RECORD_TEST_ID="+NewID(time.Now(), 1000+i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	done := make(chan error, n)
	for _, c := range cmds {
		go func() { done <- c.Wait() }()
	}
	reads := 0
	for finished := 0; finished < n; {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("writer: %v", err)
			}
			finished++
		default:
			es, err := s.List()
			if err != nil {
				t.Fatal(err)
			}
			// Reading must be quick to catch a write half done: a whole
			// record ends with its closing brace (and a newline).
			for _, e := range es {
				data, err := os.ReadFile(e.Path)
				if err == nil && !bytes.HasSuffix(data, []byte("}\n")) {
					t.Errorf("record %s is not whole: %d bytes read", e.ID, len(data))
				}
				reads++
			}
		}
	}
	es, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != n {
		t.Fatalf("%d records kept, want %d", len(es), n)
	}
	for _, e := range es {
		run, err := ReadFile(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Actions) != 4000 || run.ID != e.ID {
			t.Errorf("record %s: id %s, %d actions", e.ID, run.ID, len(run.Actions))
		}
	}
	tot, err := s.Totals()
	if err != nil {
		t.Fatal(err)
	}
	if tot.Runs != n || tot.Actions != n*4000 {
		t.Errorf("totals count %d runs and %d actions, want %d and %d", tot.Runs, tot.Actions, n, n*4000)
	}
	leftovers, _ := filepath.Glob(filepath.Join(s.Dir, ".*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	t.Logf("%d reads of records while they were written", reads)
}

// TestPrune keeps the newest records within the count and the size bounds.
func TestPrune(t *testing.T) {
	s := Open(t.TempDir())
	s.MaxRuns = 3
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := 0; i < 6; i++ {
		id := NewID(base.Add(time.Duration(i)*time.Second), 1)
		ids = append(ids, id)
		if err := s.Write(bigRun(id, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if got := listIDs(t, s); strings.Join(got, " ") != strings.Join(ids[3:], " ") {
		t.Errorf("kept %v, want the newest three %v", got, ids[3:])
	}
	// By size: a bound below two records keeps the newest alone.
	es, _ := s.List()
	s.MaxBytes = es[0].Size + es[0].Size/2
	id := NewID(base.Add(time.Hour), 1)
	if err := s.Write(bigRun(id, 10)); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s); len(got) != 1 || got[0] != id {
		t.Errorf("kept %v, want only %s", got, id)
	}
	// The record just written is kept even when it alone is too large.
	s.MaxBytes = 1
	id2 := NewID(base.Add(2*time.Hour), 1)
	if err := s.Write(bigRun(id2, 10)); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, s); len(got) != 1 || got[0] != id2 {
		t.Errorf("kept %v, want only %s", got, id2)
	}
}

func listIDs(t *testing.T, s *Store) []string {
	t.Helper()
	es, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestLoad finds records by last, last~N, ID prefix and file, and refuses
// a record of a later schema.
func TestLoad(t *testing.T) {
	s := Open(t.TempDir())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		if err := s.Write(bigRun(NewID(base.Add(time.Duration(i)*time.Minute), 7), 1)); err != nil {
			t.Fatal(err)
		}
	}
	ids := listIDs(t, s)
	for which, want := range map[string]string{"last": ids[2], "": ids[2], "last~2": ids[0], ids[1][:16]: ids[1],
		listPath(t, s, 0): ids[0]} {
		run, err := s.Load(which)
		if err != nil || run.ID != want {
			t.Errorf("Load(%q) = %v, %v; want %s", which, run, err, want)
		}
	}
	for _, bad := range []string{"last~3", "2025", "20260101-00", "last~x"} {
		if _, err := s.Load(bad); err == nil {
			t.Errorf("Load(%q) succeeded", bad)
		}
	}
	future := filepath.Join(t.TempDir(), "future.json")
	data, _ := json.Marshal(map[string]any{"schema": Schema + 1, "id": "x"})
	os.WriteFile(future, data, 0o644)
	if _, err := ReadFile(future); err == nil || !strings.Contains(err.Error(), strconv.Itoa(Schema+1)) {
		t.Errorf("a record of schema %d: %v", Schema+1, err)
	}
}

func TestRecordDirReadsTheHeader(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	run := &Run{Schema: Schema, ID: "20260101-000000.000-1", Dir: "/some/where",
		Actions: []Action{{Module: "a.o"}, {Module: "b.o"}}}
	if err := s.Write(run); err != nil {
		t.Fatal(err)
	}
	es, err := s.List()
	if err != nil || len(es) != 1 {
		t.Fatalf("List: %v, %v", es, err)
	}
	got, err := recordDir(es[0].Path)
	if err != nil || got != run.Dir {
		t.Fatalf("recordDir = %q, %v; want %q", got, err, run.Dir)
	}
	// A file that is not a record is an error, not a match.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("[1,2]"), 0o644)
	if _, err := recordDir(bad); err == nil {
		t.Fatal("recordDir of a JSON array: no error")
	}
}

// listPath is the path of the i-th oldest record of s.
func listPath(t *testing.T, s *Store, i int) string {
	t.Helper()
	es, err := s.List()
	if err != nil || len(es) <= i {
		t.Fatalf("List: %d records, %v", len(es), err)
	}
	return es[i].Path
}

// TestPrunePerOutput: a busy output's records do not push out another's.
// Each output keeps its newest MaxPerOutput; past MaxRuns, the output
// with the most records loses its oldest first; past MaxBytes, the output
// with the most bytes.
func TestPrunePerOutput(t *testing.T) {
	s := Open(t.TempDir())
	s.MaxPerOutput, s.MaxRuns = 4, 6
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	write := func(output string, modules int) string {
		t.Helper()
		n++
		run := bigRun(NewID(base.Add(time.Duration(n)*time.Second), 1), modules)
		run.Output = output
		if err := s.Write(run); err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	b1, c1 := write("/src/b", 1), write("/src/c", 1)
	var a []string
	for i := 0; i < 10; i++ {
		a = append(a, write("/src/a", 1))
	}
	want := []string{b1, c1, a[6], a[7], a[8], a[9]}
	if got := listIDs(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kept %v, want b's and c's records and a's newest 4: %v", got, want)
	}
	d1, d2 := write("/src/d", 1), write("/src/d", 1)
	want = []string{b1, c1, a[8], a[9], d1, d2}
	if got := listIDs(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("past 6 records kept %v, want a's oldest gone first: %v", got, want)
	}
	// By bytes: e's one large record goes before anything of the others.
	e1 := write("/src/e", 400)
	es, _ := s.List()
	var total int64
	for _, e := range es {
		total += e.Size
	}
	s.MaxRuns, s.MaxBytes = 100, total-1
	before := listIDs(t, s) // e1 took a's a[8]: 6 records at most
	f1 := write("/src/f", 1)
	want = append(slices.DeleteFunc(before, func(id string) bool { return id == e1 }), f1)
	if got := listIDs(t, s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("past the bytes bound kept %v, want all but e's record %s: %v", got, e1, want)
	}
}

// TestKeepBothOrNeither: Keep counts a record in the totals exactly when
// it keeps it. When the totals cannot be written (here: a directory in
// their place, as a full disk refuses them), the record is not kept
// either; `stats` never shows fewer runs than are recorded.
func TestKeepBothOrNeither(t *testing.T) {
	s := Open(t.TempDir())
	run := bigRun(NewID(time.Now(), 1), 3)
	if err := s.Keep(run); err != nil {
		t.Fatal(err)
	}
	if tot, err := s.Totals(); err != nil || tot.Runs != 1 || len(listIDs(t, s)) != 1 {
		t.Fatalf("after Keep: totals %+v (%v), records %v", tot, err, listIDs(t, s))
	}
	if err := os.Remove(s.totalsPath()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.totalsPath(), 0o755); err != nil {
		t.Fatal(err)
	}
	second := bigRun(NewID(time.Now().Add(time.Second), 1), 3)
	err := s.Keep(second)
	if err == nil || !strings.Contains(err.Error(), "totals") {
		t.Errorf("Keep with unwritable totals: %v, want an error naming the totals", err)
	}
	if got := listIDs(t, s); len(got) != 1 || got[0] != run.ID {
		t.Errorf("records %v after the totals failed, want only %s: a record kept and not counted", got, run.ID)
	}
}

// TestLastUnder finds the newest run that linked under a directory, by
// its output (a relative one under its working directory) or its working
// directory, and falls back to the newest of all.
func TestLastUnder(t *testing.T) {
	s := Open(t.TempDir())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i, r := range []struct{ dir, output string }{
		{"/p/a", "/p/a/app"},          // 0
		{"/r", "bin/tool"},            // 1: relative, under /r/bin
		{"/p/b/build", ""},            // 2: no output
		{"/elsewhere", "/p/c/lib.so"}, // 3: output under /p, dir not
		{"/q", "/q/app"},              // 4: the newest of all
	} {
		run := bigRun(NewID(base.Add(time.Duration(i)*time.Minute), 1), 2)
		run.Dir, run.Output = r.dir, r.output
		if err := s.Write(run); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	for dir, want := range map[string]string{"/p": ids[3], "/p/a": ids[0], "/r/bin": ids[1], "/r": ids[1],
		"/p/b": ids[2], "/p/c": ids[3], "/elsewhere": ids[3], "/q": ids[4], "/p/a/app": ids[0]} {
		run, found, err := s.LastUnder(dir)
		if err != nil || !found || run.ID != want {
			t.Errorf("LastUnder(%s) = %s, %v, %v; want %s", dir, idOf(run), found, err, want)
		}
	}
	// /pq is not under /p; nothing is: the newest, not found.
	run, found, err := s.LastUnder("/pq")
	if err != nil || found || run.ID != ids[4] {
		t.Errorf("LastUnder(/pq) = %s, %v, %v; want the newest %s, not found", idOf(run), found, err, ids[4])
	}
}

func idOf(run *Run) string {
	if run == nil {
		return "no run"
	}
	return run.ID
}
