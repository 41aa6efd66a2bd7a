package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sys/digest"
)

// bulkStore is a Disk that also writes blobs in bulk, counting its calls,
// and fails the bulk writes while failBulk is set.
type bulkStore struct {
	*Disk
	bulk, single, entries atomic.Int64
	failBulk              atomic.Bool
	mu                    sync.Mutex
	asked                 []bool // each bulk write's ask
	// gate, if set, holds each bulk write until it is closed.
	gate chan struct{}
}

func (s *bulkStore) WriteBlobsBytes(ctx context.Context, m Meter, blobs map[digest.Digest][]byte, ask bool) error {
	s.bulk.Add(1)
	s.mu.Lock()
	s.asked = append(s.asked, ask)
	s.mu.Unlock()
	if s.gate != nil {
		<-s.gate
	}
	if s.failBulk.Load() {
		return errors.New("injected: the service is down")
	}
	for d, b := range blobs {
		if err := s.Disk.WriteBlobBytes(ctx, nil, d, b); err != nil {
			return err
		}
	}
	return nil
}

func (s *bulkStore) WriteBlob(ctx context.Context, m Meter, d digest.Digest, src string) error {
	s.single.Add(1)
	return s.Disk.WriteBlob(ctx, m, d, src)
}

func (s *bulkStore) UpdateActionResult(ctx context.Context, key digest.Digest, res *repb.ActionResult) error {
	s.entries.Add(1)
	return s.Disk.UpdateActionResult(ctx, key, res)
}

func newBulkStore(t *testing.T) *bulkStore {
	d, err := OpenDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &bulkStore{Disk: d}
}

// storeResult stores an object as cache.Executor does: its blob from a
// file, which is gone once the call returns (a staged output renamed),
// then its entry.
func storeResult(t *testing.T, w Store, dir string, i int) digest.Digest {
	t.Helper()
	obj := elfObject(fmt.Sprint("object ", i))
	p := filepath.Join(dir, fmt.Sprintf("o%d", i))
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	d := digest.OfBytes(obj)
	ctx := context.Background()
	if err := w.WriteBlob(ctx, nil, d, p); err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	key := digest.OfBytes([]byte(fmt.Sprint("key ", i)))
	if err := w.UpdateActionResult(ctx, key, &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out/0", Digest: d.Proto()}}}); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestWriteBehindStoresInBursts: results stored within a window go to the
// store together, one bulk write for all their blobs, read when they were
// handed over (their files are gone by then); Close sends what is left, and
// every entry can be read back with its blob.
func TestWriteBehindStoresInBursts(t *testing.T) {
	s := newBulkStore(t)
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: time.Hour, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: t.Errorf})
	dir := t.TempDir()
	var keys []digest.Digest
	for i := range 20 {
		keys = append(keys, storeResult(t, w, dir, i))
	}
	if n := s.entries.Load(); n != 0 {
		t.Fatalf("%d entries stored before the window ended or Close", n)
	}
	w.Close()
	if b, one, e := s.bulk.Load(), s.single.Load(), s.entries.Load(); b != 1 || one != 0 || e != 20 {
		t.Errorf("bulk writes %d, single writes %d, entries %d; want 1, 0, 20", b, one, e)
	}
	if st := w.Stats(); st.Results != 20 || st.Bursts != 1 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	// The link waits for the burst Close sends: no lookup first.
	if len(s.asked) != 1 || s.asked[0] {
		t.Errorf("the bulk writes asked first: %v, want [false]", s.asked)
	}
	for i, k := range keys {
		ar, err := s.GetActionResult(context.Background(), nil, k, nil)
		if err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
		d, _ := digest.FromProto(ar.OutputFiles[0].Digest)
		if b, err := s.ReadBlobBytes(context.Background(), nil, d); err != nil || string(b) != string(elfObject(fmt.Sprint("object ", i))) {
			t.Errorf("result %d: blob %q, %v", i, b, err)
		}
	}
}

// TestWriteBehindWindow: a result is stored once its window has passed,
// without Close.
func TestWriteBehindWindow(t *testing.T) {
	s := newBulkStore(t)
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: 20 * time.Millisecond, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: t.Errorf})
	defer w.Close()
	storeResult(t, w, t.TempDir(), 0)
	deadline := time.Now().Add(10 * time.Second)
	for s.entries.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not stored 10 s after a 20 ms window")
		}
		time.Sleep(time.Millisecond)
	}
	// While the run goes on, a lookup saves sending what the store has.
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) != 1 || !s.asked[0] {
		t.Errorf("the bulk writes asked first: %v, want [true]", s.asked)
	}
}

// TestWriteBehindSkipsEntriesWithoutBlobs: an entry whose blob could not be
// written is not stored (it would name a blob the store lacks), and the
// failure is reported; the next burst, once the store works, is stored.
func TestWriteBehindSkipsEntriesWithoutBlobs(t *testing.T) {
	s := newBulkStore(t)
	var mu sync.Mutex
	var warned []string
	warn := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		warned = append(warned, fmt.Sprintf(format, args...))
	}
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: time.Millisecond, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: warn})
	dir := t.TempDir()
	s.failBulk.Store(true)
	lost := storeResult(t, w, dir, 0)
	deadline := time.Now().Add(10 * time.Second)
	for s.bulk.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the burst was not sent")
		}
		time.Sleep(time.Millisecond)
	}
	s.failBulk.Store(false)
	kept := storeResult(t, w, dir, 1)
	w.Close()
	if _, err := s.GetActionResult(context.Background(), nil, lost, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("the entry whose blob failed: %v, want not found", err)
	}
	if _, err := s.GetActionResult(context.Background(), nil, kept, nil); err != nil {
		t.Errorf("the entry after the failure: %v", err)
	}
	if st := w.Stats(); st.Results != 1 || st.Failed != 1 {
		t.Errorf("stats %+v, want 1 stored and 1 failed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) != 1 {
		t.Errorf("warnings %q, want one", warned)
	}
}

// TestWriteBehindLargeBlobsGoAtOnce: a blob larger than a burst, or one
// that would take the memory held over MaxPending, is written by its
// caller through the store underneath, as it comes.
func TestWriteBehindLargeBlobsGoAtOnce(t *testing.T) {
	s := newBulkStore(t)
	small := int64(len(elfObject("object 0")))
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: time.Hour, BurstBytes: small, MaxPending: small, Warn: t.Errorf})
	dir := t.TempDir()
	storeResult(t, w, dir, 0) // fits
	if n := s.single.Load(); n != 0 {
		t.Fatalf("%d single writes for a blob that fits", n)
	}
	storeResult(t, w, dir, 10) // one byte longer than a burst
	if n := s.single.Load(); n != 1 {
		t.Errorf("%d single writes, want 1 for the blob over BurstBytes", n)
	}
	w.Close()
	if n := s.entries.Load(); n != 2 {
		t.Errorf("%d entries stored, want 2", n)
	}
}

// TestWriteBehindCancelled: once the run's context ends, Close returns
// without storing what was left.
func TestWriteBehindCancelled(t *testing.T) {
	s := newBulkStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWriteBehind(ctx, s, WriteBehindOptions{Window: time.Hour, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: t.Errorf})
	storeResult(t, w, t.TempDir(), 0)
	cancel()
	done := make(chan struct{})
	go func() { w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the context ended")
	}
	if n := s.entries.Load(); n != 0 {
		t.Errorf("%d entries stored after the run was cancelled", n)
	}
}

// knownStore is a bulkStore that knows it holds the blobs in known.
type knownStore struct {
	*bulkStore
	known map[digest.Digest]bool
}

func (s *knownStore) HasBlob(d digest.Digest) bool { return s.known[d] }

// TestWriteBehindCountsWhatItSends: a result's blob counts as sent for its
// action (executor.Metered) when handed over, once however many results
// name it, and not at all when the store is known to hold it already (a
// remote execution's output, read from the CAS).
func TestWriteBehindCountsWhatItSends(t *testing.T) {
	held, fresh := elfObject("held"), elfObject("fresh")
	s := &knownStore{bulkStore: newBulkStore(t), known: map[digest.Digest]bool{digest.OfBytes(held): true}}
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: time.Hour, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: t.Errorf})
	sent := func(data []byte) int64 {
		t.Helper()
		res, err := executor.Metered(executor.Func(func(ctx context.Context, j executor.Job) (*executor.Result, error) {
			return &executor.Result{}, w.WriteBlobBytes(ctx, j.Meter, digest.OfBytes(data), data)
		})).Execute(context.Background(), executor.Job{Action: &action.Action{ID: "m.o"}, Out: nil})
		if err != nil {
			t.Fatal(err)
		}
		return res.BytesUp
	}
	if n := sent(held); n != 0 {
		t.Errorf("a blob the store holds counted %d bytes sent", n)
	}
	if n := sent(fresh); n != int64(len(fresh)) {
		t.Errorf("a new blob counted %d bytes sent, want %d", n, len(fresh))
	}
	if n := sent(fresh); n != 0 {
		t.Errorf("the same blob again counted %d bytes sent", n)
	}
	w.Close()
	if n := s.bulk.Load(); n != 1 {
		t.Errorf("%d bulk writes, want 1", n)
	}
	if _, err := s.ReadBlobBytes(context.Background(), nil, digest.OfBytes(held)); !errors.Is(err, ErrNotFound) {
		t.Errorf("the held blob was written anyway (%v)", err)
	}
}

// TestWriteBehindEntryWaitsForItsBlob: an entry that goes in a later burst
// than its blob is stored only once that earlier burst has written it,
// never before (it would name a blob the store lacks).
func TestWriteBehindEntryWaitsForItsBlob(t *testing.T) {
	s := newBulkStore(t)
	s.gate = make(chan struct{})
	w := NewWriteBehind(context.Background(), s, WriteBehindOptions{Window: time.Millisecond, BurstBytes: 1 << 20, MaxPending: 8 << 20, Warn: t.Errorf})
	obj := elfObject("slow blob")
	d := digest.OfBytes(obj)
	ctx := context.Background()
	if err := w.WriteBlobBytes(ctx, nil, d, obj); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.bulk.Load() == 0 { // the blob's burst is being written, held
		if time.Now().After(deadline) {
			t.Fatal("the blob's burst was not sent")
		}
		time.Sleep(time.Millisecond)
	}
	key := digest.OfBytes([]byte("key"))
	if err := w.UpdateActionResult(ctx, key, &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out/0", Digest: d.Proto()}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the entry's own burst has gone
	if n := s.entries.Load(); n != 0 {
		t.Fatalf("the entry was stored while its blob was still being written")
	}
	close(s.gate)
	w.Close()
	if n := s.entries.Load(); n != 1 {
		t.Errorf("%d entries stored, want 1", n)
	}
	if _, err := s.GetActionResult(ctx, nil, key, nil); err != nil {
		t.Error(err)
	}
}
