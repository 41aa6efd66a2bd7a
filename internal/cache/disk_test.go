package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/sys/digest"
)

func openDisk(t *testing.T) *Disk {
	t.Helper()
	d, err := OpenDisk(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// blob makes n bytes of content derived from seed.
func blob(seed, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(seed))).Read(b)
	return b
}

// writeFile writes a new file at dir/name, as every writer of thindist's
// does (never into an existing one: it may be a name of a stored blob).
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	os.Remove(p)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func record(d digest.Digest) *repb.ActionResult {
	return &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out/0", Digest: d.Proto()}}}
}

func keyOf(i int) digest.Digest { return digest.OfBytes([]byte(fmt.Sprintf("action %d", i))) }

func TestDiskRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	data := blob(1, 5000)
	d := digest.OfBytes(data)
	if err := c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateActionResult(ctx, keyOf(1), record(d)); err != nil {
		t.Fatal(err)
	}
	ar, err := c.GetActionResult(ctx, nil, keyOf(1), nil)
	if err != nil || ar.OutputFiles[0].Digest.Hash != d.HexHash() {
		t.Fatalf("GetActionResult: %v %v", ar, err)
	}
	if _, err := c.GetActionResult(ctx, nil, keyOf(2), nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown key: %v, want ErrNotFound", err)
	}
	dst := filepath.Join(tmp, "dst")
	if err := c.ReadBlob(ctx, nil, d, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); string(got) != string(data) {
		t.Error("ReadBlob returned other content")
	}
	if err := c.ReadBlob(ctx, nil, digest.OfBytes([]byte("nope")), dst); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing blob: %v, want ErrNotFound", err)
	}
	// A source that is not what its digest says is not stored.
	other := digest.OfBytes(blob(2, 10))
	if err := c.WriteBlob(ctx, nil, other, writeFile(t, tmp, "liar", blob(3, 10))); err == nil {
		t.Error("WriteBlob stored content under another digest")
	}
	if err := c.ReadBlob(ctx, nil, other, dst); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a refused write: %v, want ErrNotFound", err)
	}
}

// TestDiskCorruptEntries: a flipped or truncated blob, a flipped or
// truncated record: each reads as a miss or an error, never as content,
// and is removed.
func TestDiskCorruptEntries(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	damage := map[string]func(p string){
		"flip": func(p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o644)
		},
		"truncate": func(p string) { os.Truncate(p, 7) },
		"empty":    func(p string) { os.Truncate(p, 0) },
	}
	i := 0
	for name, f := range damage {
		i++
		data := blob(i, 3000)
		d := digest.OfBytes(data)
		c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data))
		c.UpdateActionResult(ctx, keyOf(i), record(d))

		os.Chmod(c.casPath(d), 0o644) // blobs are read-only
		f(c.casPath(d))
		dst := filepath.Join(tmp, "dst-"+name)
		if err := c.ReadBlob(ctx, nil, d, dst); err == nil {
			t.Errorf("%s blob: ReadBlob succeeded", name)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Errorf("%s blob: the damaged content was left at the destination", name)
		}
		if _, err := os.Stat(c.casPath(d)); err == nil {
			t.Errorf("%s blob: not removed from the cache", name)
		}
		if _, err := c.ReadBlobBytes(ctx, nil, d); err == nil {
			t.Errorf("%s blob: ReadBlobBytes succeeded", name)
		}

		f(c.acPath(keyOf(i)))
		if _, err := c.GetActionResult(ctx, nil, keyOf(i), nil); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s record: %v, want an error that says it is corrupt", name, err)
		}
		if _, err := os.Stat(c.acPath(keyOf(i))); err == nil {
			t.Errorf("%s record: not removed", name)
		}
		// Storing again repairs the entry.
		c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data))
		c.UpdateActionResult(ctx, keyOf(i), record(d))
		if err := c.ReadBlob(ctx, nil, d, dst); err != nil {
			t.Errorf("%s: after a rewrite: %v", name, err)
		}
		if _, err := c.GetActionResult(ctx, nil, keyOf(i), nil); err != nil {
			t.Errorf("%s: record after a rewrite: %v", name, err)
		}
	}
}

// TestDiskConcurrent: several stores on one directory (as several links
// would open it) write, read, evict and count at once. Every successful
// read returns exactly the content of its digest; nothing else fails.
func TestDiskConcurrent(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cache")
	const workers, blobs, rounds = 6, 24, 60
	contents := make([][]byte, blobs)
	for i := range contents {
		contents[i] = blob(i, 2000+i*37)
	}
	srcDir := t.TempDir()
	for i, b := range contents {
		writeFile(t, srcDir, fmt.Sprint(i), b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := OpenDisk(dir) // one store per "link"
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewSource(int64(w)))
			out := t.TempDir()
			for r := 0; r < rounds; r++ {
				i := rng.Intn(blobs)
				d := digest.OfBytes(contents[i])
				switch rng.Intn(5) {
				case 0, 1:
					if err := c.WriteBlob(ctx, nil, d, filepath.Join(srcDir, fmt.Sprint(i))); err != nil {
						errs <- fmt.Errorf("write %d: %v", i, err)
					}
					if err := c.UpdateActionResult(ctx, keyOf(i), record(d)); err != nil {
						errs <- fmt.Errorf("update %d: %v", i, err)
					}
				case 2, 3:
					ar, err := c.GetActionResult(ctx, nil, keyOf(i), nil)
					if errors.Is(err, ErrNotFound) {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("get %d: %v", i, err)
						continue
					}
					got, _ := digest.FromProto(ar.OutputFiles[0].Digest)
					if got != d {
						errs <- fmt.Errorf("record %d names blob %s, want %s", i, got, d)
					}
					dst := filepath.Join(out, fmt.Sprint(r))
					err = c.ReadBlob(ctx, nil, got, dst)
					if errors.Is(err, ErrNotFound) {
						continue // evicted meanwhile
					}
					if err != nil {
						errs <- fmt.Errorf("read %d: %v", i, err)
						continue
					}
					if b, _ := os.ReadFile(dst); string(b) != string(contents[i]) {
						errs <- fmt.Errorf("read %d: wrong content", i)
					}
				case 4:
					if err := c.Finish(Stats{Hits: 1, Misses: 1}, 20000); err != nil {
						errs <- fmt.Errorf("finish: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c, _ := OpenDisk(dir)
	if _, err := c.Trim(20000); err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Bytes > 20000 {
		t.Errorf("%d bytes after Trim(20000)", s.Bytes)
	}
	if s.Hits != s.Misses {
		t.Errorf("counters lost updates: %d hits, %d misses", s.Hits, s.Misses)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Errorf("%d temporary files left", len(left))
	}
}

// TestDiskTrimLRU: Trim keeps the most recently used entries, a read
// counting as a use.
func TestDiskTrimLRU(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	var ds []digest.Digest
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 10; i++ {
		data := blob(i, 1000)
		d := digest.OfBytes(data)
		ds = append(ds, d)
		c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data))
		// Entry i was last used i minutes after old.
		at := old.Add(time.Duration(i) * time.Minute)
		os.Chtimes(c.casPath(d), at, at)
	}
	// Reading entry 0 makes it the most recent.
	if err := c.ReadBlob(ctx, nil, ds[0], filepath.Join(tmp, "dst")); err != nil {
		t.Fatal(err)
	}
	n, err := c.Trim(4500)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Errorf("evicted %d entries, want 6", n)
	}
	for i, d := range ds {
		_, err := os.Stat(c.casPath(d))
		kept := err == nil
		if want := i == 0 || i >= 7; kept != want {
			t.Errorf("entry %d kept=%v, want %v", i, kept, want)
		}
	}
	s, _ := c.Stats()
	// Blobs alone are no entries: the stats count entries evicted in the
	// unit of Entries, and the bytes.
	if s.Evictions != 0 || s.EvictedBytes != 6000 || s.Bytes > 4500 {
		t.Errorf("stats %+v", s)
	}
}

// TestDiskFinishCountsRecords: a run that stores only action records (or
// mostly: records are a real share of a cache of small objects) must still
// trigger the trim once the cache passes the limit.
func TestDiskFinishCountsRecords(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	d := digest.OfBytes([]byte("x"))
	for i := 0; i < 200; i++ {
		if err := c.UpdateActionResult(ctx, keyOf(i), record(d)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := c.Stats()
	limit := s.Bytes / 2
	if err := c.Finish(Stats{}, limit); err != nil {
		t.Fatal(err)
	}
	after, _ := c.Stats()
	if after.Bytes > limit {
		t.Errorf("the cache holds %d bytes after Finish with limit %d", after.Bytes, limit)
	}
	if after.Evictions != s.Entries-after.Entries || after.Evictions == 0 {
		t.Errorf("%d evictions counted, %d entries left of %d", after.Evictions, after.Entries, s.Entries)
	}
	if after.Limit != limit {
		t.Errorf("the stats record limit %d, want the one Finish applied, %d", after.Limit, limit)
	}
	if err := c.ZeroStats(); err != nil {
		t.Fatal(err)
	}
	if z, _ := c.Stats(); z.Evictions != 0 || z.Entries != after.Entries || z.Limit != limit {
		t.Errorf("after ZeroStats: %+v (before %+v)", z, after)
	}
}

func TestDiskClear(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	data := blob(1, 100)
	d := digest.OfBytes(data)
	c.WriteBlobBytes(ctx, nil, d, data)
	c.UpdateActionResult(ctx, keyOf(1), record(d))
	c.AddStats(Stats{Hits: 3, Misses: 4, SavedCPU: time.Second})
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Entries != 0 || s.Bytes != 0 || s.Hits != 0 || s.Misses != 0 || s.SavedCPU != 0 {
		t.Errorf("after Clear: %+v", s)
	}
	if _, err := c.GetActionResult(ctx, nil, keyOf(1), nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Clear: %v", err)
	}
}

// TestDiskBlobsLinkedReadOnly: storing a file's blob makes no new file (the
// blob is a hard link to it) and a hit places it the same way; every name
// of the blob is read-only, so a linker or user opening a placed object to
// write it is refused (unless root, whom TestExecutorHitWrittenThrough
// covers).
func TestDiskBlobsLinkedReadOnly(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	data := blob(1, 3000)
	d := digest.OfBytes(data)
	src := writeFile(t, tmp, "out", data)
	if err := c.WriteBlob(ctx, nil, d, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(tmp, "placed")
	if err := c.ReadBlob(ctx, nil, d, dst); err != nil {
		t.Fatal(err)
	}
	stored, err := os.Stat(c.casPath(d))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{src, dst} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(fi, stored) {
			t.Errorf("%s is not the stored blob (a copy: a new file)", p)
		}
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s, a name of the stored blob, is writable: %v", p, fi.Mode())
		}
	}
	if os.Geteuid() != 0 {
		if f, err := os.OpenFile(dst, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Errorf("the placed object opened for writing")
		}
	}
}

// TestDiskReadBlobOverLeftFile: a blob placed over a file an earlier
// attempt left at the destination (here a name of another blob) replaces
// it and leaves that blob alone.
func TestDiskReadBlobOverLeftFile(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	one, two := blob(1, 2000), blob(2, 2000)
	d1, d2 := digest.OfBytes(one), digest.OfBytes(two)
	c.WriteBlob(ctx, nil, d1, writeFile(t, tmp, "one", one))
	c.WriteBlob(ctx, nil, d2, writeFile(t, tmp, "two", two))
	dst := filepath.Join(tmp, "dst")
	if err := c.ReadBlob(ctx, nil, d1, dst); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadBlob(ctx, nil, d2, dst); err != nil {
		t.Fatalf("over a left file: %v", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != string(two) {
		t.Error("the destination does not hold the blob placed last")
	}
	if got, err := c.ReadBlobBytes(ctx, nil, d1); err != nil || string(got) != string(one) {
		t.Errorf("the blob the left file was a name of changed: %v", err)
	}
}

// TestDiskBlobAcrossFileSystems: a file on another file system than the
// cache is stored as a copy (read-only) and left as it was, and a hit
// places a copy there.
func TestDiskBlobAcrossFileSystems(t *testing.T) {
	other, err := os.MkdirTemp("/dev/shm", "thindist-test-")
	if err != nil {
		t.Skipf("no second file system: %v", err)
	}
	defer os.RemoveAll(other)
	ctx := context.Background()
	c := openDisk(t)
	if a, b := deviceOf(t, other), deviceOf(t, c.Dir()); a == b {
		t.Skip("/dev/shm is on the cache's file system")
	}
	data := blob(3, 3000)
	d := digest.OfBytes(data)
	src := writeFile(t, other, "out", data)
	if err := c.WriteBlob(ctx, nil, d, src); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(src); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the copied file's mode changed: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(c.casPath(d)); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("the copied blob is writable or missing: %v", err)
	}
	dst := filepath.Join(other, "placed")
	if err := c.ReadBlob(ctx, nil, d, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); string(got) != string(data) {
		t.Error("the placed copy differs")
	}
}

func deviceOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Dev)
}

// TestDiskUseTimeInterval: a read sets an entry's use time when it is
// touchInterval old or more, and leaves a recent one as it is (no system
// call per entry for a relink soon after the last).
func TestDiskUseTimeInterval(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	data := blob(3, 2000)
	d := digest.OfBytes(data)
	if err := c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data)); err != nil {
		t.Fatal(err)
	}
	key := keyOf(1)
	if err := c.UpdateActionResult(ctx, key, record(d)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		age     time.Duration
		touched bool
	}{{10 * time.Minute, false}, {touchInterval + time.Minute, true}} {
		at := time.Now().Add(-tc.age).Truncate(time.Second)
		for _, p := range []string{c.casPath(d), c.acPath(key)} {
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.GetActionResult(ctx, nil, key, nil); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(tmp, "dst")
		os.Remove(dst)
		if err := c.ReadBlob(ctx, nil, d, dst); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadBlobBytes(ctx, nil, d); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{c.casPath(d), c.acPath(key)} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := !fi.ModTime().Equal(at); got != tc.touched {
				t.Errorf("used %v ago: %s touched=%v, want %v", tc.age, filepath.Base(filepath.Dir(filepath.Dir(p))), got, tc.touched)
			}
		}
	}
}

// TestDiskReadBlobHead: the head comes from the read that verifies the
// blob, on the hard-link path and on the copy path alike.
func TestDiskReadBlobHead(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	tmp := t.TempDir()
	data := blob(4, 3000)
	d := digest.OfBytes(data)
	if err := c.WriteBlob(ctx, nil, d, writeFile(t, tmp, "src", data)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{64, 5000} {
		head := make([]byte, n)
		dst := filepath.Join(tmp, "dst")
		os.Remove(dst)
		got, err := c.ReadBlobHead(ctx, nil, d, dst, head)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(n, len(data)); got != want || string(head[:got]) != string(data[:want]) {
			t.Errorf("head of %d: got %d bytes, want %d of the blob", n, got, want)
		}
	}
	// A corrupt blob: an error, no head.
	os.Chmod(c.casPath(d), 0o644)
	os.WriteFile(c.casPath(d), []byte("other"), 0o644)
	if _, err := c.ReadBlobHead(ctx, nil, d, filepath.Join(tmp, "dst2"), make([]byte, 64)); err == nil {
		t.Error("a corrupt blob was read")
	}
}
