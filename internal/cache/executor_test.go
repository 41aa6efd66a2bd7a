package cache

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/digest"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/proc"
	"github.com/thindist/thindist/internal/reapi"
	"github.com/thindist/thindist/internal/testprog"
)

// realActions returns the actions of a real link (shards on disk), which
// the Keyer needs.
func realActions(t *testing.T) []*action.Action {
	return testprog.Actions(t, testprog.Options{Modules: 3, Seed: 7})
}

// elfObject is the smallest content CheckObject accepts, plus a tag.
func elfObject(tag string) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	h[16] = 1 // ET_REL
	return append(h, tag...)
}

// fake is a compiler: it writes what produce returns as the object and
// counts its runs.
type fake struct {
	runs    atomic.Int64
	produce func() (obj []byte, res *executor.Result)
}

func (f *fake) Execute(_ context.Context, j executor.Job) (*executor.Result, error) {
	out := j.Out
	f.runs.Add(1)
	obj, res := f.produce()
	if obj != nil {
		if err := os.WriteFile(out[0], obj, 0o644); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func chain(t *testing.T, store Store, next executor.Executor, opts Options) *Executor {
	keys := &reapi.Keyer{
		Files:      digest.NewFiles(),
		CompilerID: func(string) (string, error) { return "sha256:fake", nil },
	}
	if opts.Warn == nil {
		opts.Warn = t.Logf
	}
	return NewExecutor(store, keys, executor.Verified(next), opts)
}

func TestExecutorHitMiss(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) {
		return elfObject("one"), &executor.Result{CPU: 1500 * time.Millisecond, Stderr: []byte("warning: x\n")}
	}}
	ex := chain(t, disk, comp, Options{Where: executor.LocalCache})
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := ex.Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
		t.Fatal(err)
	}
	// A second executor, as a second link would have.
	ex2 := chain(t, disk, comp, Options{Where: executor.LocalCache})
	out2 := filepath.Join(t.TempDir(), "obj")
	res, err := ex2.Execute(ctx, executor.Job{Action: a, Out: []string{out2}})
	if err != nil {
		t.Fatal(err)
	}
	if n := comp.runs.Load(); n != 1 {
		t.Errorf("the compiler ran %d times, want 1", n)
	}
	if res.Where != executor.LocalCache || res.CPU != 1500*time.Millisecond || string(res.Stderr) != "warning: x\n" {
		t.Errorf("hit result %+v", res)
	}
	if got, _ := os.ReadFile(out2); string(got) != string(elfObject("one")) {
		t.Error("the hit materialised other content")
	}
	if st := ex2.Stats(); st.Hits != 1 || st.SavedCPU != 1500*time.Millisecond {
		t.Errorf("stats: %+v, want 1 hit saving 1.5s", st)
	}

	// A damaged object in the cache: recompiled, replaced. The record's
	// own checksum is right: only the object's digest tells.
	key := mustKey(t, a)
	ar, _ := disk.GetActionResult(ctx, nil, key, nil)
	ar.OutputFiles[0].Contents = elfObject("two") // a valid object, the wrong one
	if err := disk.UpdateActionResult(ctx, key, ar); err != nil {
		t.Fatal(err)
	}
	out3 := filepath.Join(t.TempDir(), "obj")
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out3}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out3); string(got) != string(elfObject("one")) {
		t.Errorf("a damaged entry produced %q", got[64:])
	}
	if n := comp.runs.Load(); n != 2 {
		t.Errorf("the compiler ran %d times, want 2 (once more for the damaged entry)", n)
	}
	if ar, err := disk.GetActionResult(ctx, nil, key, nil); err != nil || string(ar.OutputFiles[0].Contents) != string(elfObject("one")) {
		t.Errorf("the entry was not replaced: %v", err)
	}
}

func mustKey(t *testing.T, a *action.Action) digest.Digest {
	t.Helper()
	k := &reapi.Keyer{Files: digest.NewFiles(), CompilerID: func(string) (string, error) { return "sha256:fake", nil }}
	d, err := k.Key(a)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestExecutorNeverCachesFailures: a non-zero exit, a backend error that
// exits 0, an empty object and a non-object are neither stored nor served.
func TestExecutorNeverCachesFailures(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	for _, tc := range []struct {
		name string
		obj  []byte
		res  executor.Result
	}{
		{"exit 1", elfObject("x"), executor.Result{Exit: proc.Exit{ExitCode: 1}}},
		{"signal", elfObject("x"), executor.Result{Exit: proc.Exit{Signal: "killed"}}},
		{"backend error", elfObject("x"), executor.Result{Stderr: []byte("error: Error running ThinLTO backend: x\n")}},
		{"empty object", []byte{}, executor.Result{}},
		{"not an object", []byte("#!/bin/sh\n"), executor.Result{}},
		{"no object", nil, executor.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := openDisk(t)
			comp := &fake{produce: func() ([]byte, *executor.Result) { r := tc.res; return tc.obj, &r }}
			for i := 0; i < 2; i++ {
				out := filepath.Join(t.TempDir(), "obj")
				if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err == nil {
					t.Fatalf("run %d succeeded", i)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("run %d left an output", i)
				}
			}
			if n := comp.runs.Load(); n != 2 {
				t.Errorf("the compiler ran %d times, want 2 (a failure must not be served)", n)
			}
			if s, _ := disk.Stats(); s.Entries != 0 || s.Bytes != 0 {
				t.Errorf("a failure was stored: %+v", s)
			}
		})
	}
}

func TestExecutorReadOnly(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("ro"), &executor.Result{} }}
	if _, err := chain(t, disk, comp, Options{ReadOnly: true}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "o")}}); err != nil {
		t.Fatal(err)
	}
	if s, _ := disk.Stats(); s.Entries != 0 {
		t.Errorf("a read-only cache stored %d entries", s.Entries)
	}
}

// TestExecutorHitWrittenInPlace: the object a hit placed is the caller's
// own file, not the store's: a linker or a user writing the output in
// place (as a compiler wrapper's `> out` would) leaves the entry whole, and
// the next link is served from it. Both ways a hit places an object: from
// its record's contents, and from a blob (an entry of an older thindist,
// or a large object).
func TestExecutorHitWrittenInPlace(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	for _, asBlob := range []bool{false, true} {
		disk := openDisk(t)
		comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("one"), &executor.Result{} }}
		if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
			t.Fatal(err)
		}
		if asBlob {
			// The entry as an older thindist wrote it: the object a blob.
			key := mustKey(t, a)
			ar, err := disk.GetActionResult(ctx, nil, key, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := ar.OutputFiles[0]
			d, _ := digest.FromProto(f.Digest)
			if err := disk.WriteBlobBytes(ctx, nil, d, f.Contents); err != nil {
				t.Fatal(err)
			}
			f.Contents = nil
			if err := disk.UpdateActionResult(ctx, key, ar); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			out := filepath.Join(t.TempDir(), "obj")
			if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
				t.Fatal(err)
			}
			if n := comp.runs.Load(); n != 1 {
				t.Fatalf("blob %v, hit %d: the compiler ran %d times, want 1: the entry was changed through the output of the hit before", asBlob, i, n)
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("written in place")
			f.Close()
		}
	}
}

// TestExecutorAhead: while the run's lookups mostly miss, the next
// executor's work is begun before each lookup (Options.Ahead), and its
// drop comes once the action has been served; once hits outnumber misses,
// nothing is begun ahead.
func TestExecutorAhead(t *testing.T) {
	ctx := context.Background()
	as := realActions(t)
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("x"), &executor.Result{} }}
	var ahead, dropped []string
	opts := Options{Where: executor.LocalCache, Ahead: func(_ context.Context, j executor.Job) func() {
		ahead = append(ahead, j.Action.ID)
		return func() { dropped = append(dropped, j.Action.ID) }
	}}
	ex := chain(t, disk, comp, opts)
	if _, err := ex.Execute(ctx, executor.Job{Action: as[0], Out: []string{filepath.Join(t.TempDir(), "o")}}); err != nil {
		t.Fatal(err)
	}
	if len(ahead) != 1 || len(dropped) != 1 {
		t.Fatalf("a first lookup (a miss): %d begun ahead, %d dropped, want 1 and 1", len(ahead), len(dropped))
	}
	// Two hits: the first still begins ahead (1 miss, 0 hits so far), the
	// second does not (1 hit, 1 miss).
	ahead, dropped = nil, nil
	ex2 := chain(t, disk, comp, opts)
	ex2.misses.Store(1)
	for range 2 {
		if _, err := ex2.Execute(ctx, executor.Job{Action: as[0], Out: []string{filepath.Join(t.TempDir(), "o")}}); err != nil {
			t.Fatal(err)
		}
	}
	ex2.hits.Add(5)
	if _, err := ex2.Execute(ctx, executor.Job{Action: as[1], Out: []string{filepath.Join(t.TempDir(), "o")}}); err != nil {
		t.Fatal(err)
	}
	if len(ahead) != 2 || len(dropped) != 2 {
		t.Errorf("begun ahead %v, dropped %v: want the first two lookups only", ahead, dropped)
	}
}

// shardSeer is a compiler that notes the shard its Job carries.
type shardSeer struct {
	fake
	seen []byte
}

func (s *shardSeer) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	s.seen = j.Shard
	return s.fake.Execute(ctx, j)
}

// TestExecutorPassesShard: on a miss, the shard the key was made from goes
// down the chain with the action (a remote executor builds from it rather
// than reading the file again).
func TestExecutorPassesShard(t *testing.T) {
	a := realActions(t)[0]
	want, err := os.ReadFile(a.Abs(a.Inputs[1].Local()))
	if err != nil || a.Inputs[1].Role != action.RoleIndex {
		t.Fatalf("input 1 (%v) is not a readable shard: %v", a.Inputs[1].Role, err)
	}
	comp := &shardSeer{fake: fake{produce: func() ([]byte, *executor.Result) { return elfObject("one"), &executor.Result{} }}}
	ex := chain(t, openDisk(t), comp, Options{Where: executor.LocalCache})
	if _, err := ex.Execute(context.Background(), executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	if string(comp.seen) != string(want) {
		t.Errorf("the executor below got %d bytes of shard, want the file's %d", len(comp.seen), len(want))
	}
}

// TestExecutorOneFilePerObject: a result stored in a disk cache is one new
// file, its record holding the object, and a hit reads only that file.
func TestExecutorOneFilePerObject(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("one"), &executor.Result{} }}
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	count := func(sub string) int {
		n := 0
		walkFiles(filepath.Join(disk.Dir(), sub), func(string) error { n++; return nil })
		return n
	}
	if blobs, records := count("cas"), count("ac"); blobs != 0 || records != 1 {
		t.Errorf("the result took %d blobs and %d records, want the record alone", blobs, records)
	}
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); comp.runs.Load() != 1 || string(got) != string(elfObject("one")) {
		t.Errorf("the hit placed %q after %d compiles", got, comp.runs.Load())
	}
}
