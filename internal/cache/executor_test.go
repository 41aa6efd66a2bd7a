package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
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
	return chainOn(t, store, executor.Verified(next), opts)
}

// chainOn is chain with next as it is.
func chainOn(t *testing.T, store Store, next executor.Executor, opts Options) *Executor {
	keys := &reapi.Keyer{
		Files:      digest.NewFiles(),
		CompilerID: func(string) (string, error) { return "sha256:fake", nil },
	}
	if opts.Warn == nil {
		opts.Warn = t.Logf
	}
	return NewExecutor(store, keys, next, opts)
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

	// A damaged object in the cache: recompiled, replaced.
	ar, _ := disk.GetActionResult(ctx, nil, mustKey(t, a), nil)
	d, _ := digest.FromProto(ar.OutputFiles[0].Digest)
	os.Chmod(disk.casPath(d), 0o644)                       // blobs are read-only
	os.WriteFile(disk.casPath(d), elfObject("two"), 0o644) // a valid object, the wrong one
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
	if err := disk.ReadBlob(ctx, nil, d, filepath.Join(t.TempDir(), "x")); err != nil {
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

// TestExecutorUnusableHitLeavesNoLink: an entry whose object is stored but
// whose stderr blob is gone is unusable after its object was placed, as a
// hard link into the store. The next executor writes the output path in
// place (as a compiler wrapper's `> out` would, or a remote result written
// without a rename): the stored blob must keep its content.
func TestExecutorUnusableHitLeavesNoLink(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	first := &fake{produce: func() ([]byte, *executor.Result) {
		return elfObject("one"), &executor.Result{Stderr: []byte("warning: x\n")}
	}}
	if _, err := chain(t, disk, first, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	ar, err := disk.GetActionResult(ctx, nil, mustKey(t, a), nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := digest.FromProto(ar.OutputFiles[0].Digest)
	stderr, _ := digest.FromProto(ar.StderrDigest)
	if err := os.Remove(disk.casPath(stderr)); err != nil {
		t.Fatal(err)
	}
	second := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("two"), &executor.Result{} }}
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := chain(t, disk, second, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
		t.Fatal(err)
	}
	if second.runs.Load() != 1 {
		t.Fatalf("the unusable entry was served")
	}
	if got, _ := os.ReadFile(out); string(got) != string(elfObject("two")) {
		t.Errorf("the output holds %q, want the second compiler's", got[64:])
	}
	data, err := disk.ReadBlobBytes(ctx, nil, obj)
	if err != nil || string(data) != string(elfObject("one")) {
		t.Errorf("the stored object was written through a hard link: %v", err)
	}
}

// TestExecutorHitWrittenThrough: an object a hit placed is written in
// place by someone the read-only mode does not stop (root, or after a
// chmod). The next link must not place what was written: it finds the
// blob's digest wrong, removes it, compiles, and stores the entry again.
func TestExecutorHitWrittenThrough(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("one"), &executor.Result{} }}
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "obj")
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(out, 0o644)
	bad := elfObject("two")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bad)
	f.Close()
	for i, want := range []int64{2, 2} {
		out := filepath.Join(t.TempDir(), "obj")
		if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{out}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(out); string(got) != string(elfObject("one")) {
			t.Fatalf("link %d after the write placed %q", i+1, got[64:])
		}
		if n := comp.runs.Load(); n != want {
			t.Errorf("link %d after the write: %d compiles, want %d (once more, then served again)", i+1, n, want)
		}
	}
}

// TestExecutorAhead: while the run's lookups mostly miss, the work of a
// next executor that is a Preparer (executor.PrepareAhead) is begun before
// each lookup, and its drop comes once the action has been served; once
// hits outnumber misses, nothing is begun ahead.
func TestExecutorAhead(t *testing.T) {
	ctx := context.Background()
	as := realActions(t)
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("x"), &executor.Result{} }}
	var ahead, dropped []string
	next := executor.PrepareAhead(executor.Verified(comp), preparer(func(_ context.Context, j executor.Job) func() {
		ahead = append(ahead, j.Action.ID)
		return func() { dropped = append(dropped, j.Action.ID) }
	}))
	opts := Options{Where: executor.LocalCache}
	ex := chainOn(t, disk, next, opts)
	if _, err := ex.Execute(ctx, executor.Job{Action: as[0], Out: []string{filepath.Join(t.TempDir(), "o")}}); err != nil {
		t.Fatal(err)
	}
	if len(ahead) != 1 || len(dropped) != 1 {
		t.Fatalf("a first lookup (a miss): %d begun ahead, %d dropped, want 1 and 1", len(ahead), len(dropped))
	}
	// Two hits: the first still begins ahead (1 miss, 0 hits so far), the
	// second does not (1 hit, 1 miss).
	ahead, dropped = nil, nil
	ex2 := chainOn(t, disk, next, opts)
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

// preparer adapts a function to executor.Preparer.
type preparer func(ctx context.Context, j executor.Job) func()

func (p preparer) Ahead(ctx context.Context, j executor.Job) func() { return p(ctx, j) }

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

// headLiar is a Disk whose ReadBlobHead reports a head other than the
// blob's: it shows which bytes a hit checks the object by.
type headLiar struct{ *Disk }

func (h headLiar) ReadBlobHead(ctx context.Context, m Meter, d digest.Digest, dst string, head []byte) (int, error) {
	if _, err := h.Disk.ReadBlobHead(ctx, m, d, dst, head); err != nil {
		return 0, err
	}
	return copy(head, "not an object"), nil
}

// TestExecutorHitChecksPlacedHead: a hit checks the object by the head
// its HeadReader store read as it placed and verified it (not by opening
// it again), and its result carries the verified output digests, so that
// nothing above reads or stats the object again.
func TestExecutorHitChecksPlacedHead(t *testing.T) {
	ctx := context.Background()
	a := realActions(t)[0]
	disk := openDisk(t)
	comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("one"), &executor.Result{} }}
	if _, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	res, err := chain(t, disk, comp, Options{}).Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}})
	if err != nil {
		t.Fatal(err)
	}
	if want := digest.OfBytes(elfObject("one")); comp.runs.Load() != 1 || len(res.OutputDigests) != 1 || res.OutputDigests[0] != want {
		t.Errorf("hit: %d runs, output digests %v, want 1 run and [%v]", comp.runs.Load(), res.OutputDigests, want)
	}
	// The same entry through a store whose head is no object: unusable.
	var unusable error
	ex := chain(t, headLiar{disk}, comp, Options{Unusable: func(_ *action.Action, err error) { unusable = err }})
	if _, err := ex.Execute(ctx, executor.Job{Action: a, Out: []string{filepath.Join(t.TempDir(), "obj")}}); err != nil {
		t.Fatal(err)
	}
	if comp.runs.Load() != 2 || unusable == nil || !strings.Contains(unusable.Error(), "cached object") {
		t.Errorf("a head that is no object: %d runs (want 2), unusable: %v", comp.runs.Load(), unusable)
	}
}
