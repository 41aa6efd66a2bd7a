package digest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/sys/plainfile"
)

// OfFile must agree with OfBytes and with crypto/sha256 at the sizes around
// the pooled copy buffer's length.
func TestOfFile(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 4095, 64 << 10, 64<<10 + 1, 3<<20 + 7} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := OfFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := OfBytes(b); got != want || got.Size != int64(n) || got.Hash != sha256.Sum256(b) {
			t.Errorf("%d bytes: OfFile %s, OfBytes %s", n, got, want)
		}
		var out bytes.Buffer
		if m, err := Copy(&out, bytes.NewReader(b)); err != nil || m != int64(n) || !bytes.Equal(out.Bytes(), b) {
			t.Errorf("%d bytes: Copy wrote %d (%v), content equal %v", n, m, err, bytes.Equal(out.Bytes(), b))
		}
	}
	if _, err := OfFile(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want not-exist", err)
	}
}

func TestFilesHashOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.o")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFiles()
	a, err := f.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	// A run hashes each file once: a later change within the run is not
	// seen (the inputs of a link do not change while it runs).
	if err := os.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := f.Get(p)
	if err != nil || a != b || a != OfBytes([]byte("one")) {
		t.Errorf("second Get %s (%v), want the first %s", b, err, a)
	}
}

// TestPrefetch: Prefetch digests every path in the background, without a
// Get asking; a Get then returns the same digest as OfFile. With its
// context ended it digests nothing.
func TestPrefetch(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 20 {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 1000*i), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	idle := NewFiles()
	idle.Prefetch(ctx, paths, 2)
	time.Sleep(20 * time.Millisecond)
	idle.mu.Lock()
	if n := len(idle.m); n != 0 {
		t.Errorf("with its context ended, Prefetch digested %d files", n)
	}
	idle.mu.Unlock()

	f := NewFiles()
	f.Prefetch(t.Context(), append(paths, filepath.Join(dir, "absent")), 2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		n := len(f.m)
		f.mu.Unlock()
		if n == len(paths)+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prefetch reached %d of %d files", n, len(paths)+1)
		}
	}
	for _, p := range paths {
		got, err := f.Get(p)
		want, werr := OfFile(p)
		if err != nil || werr != nil || got != want {
			t.Errorf("%s: Get %v, %v; OfFile %v, %v", p, got, err, want, werr)
		}
	}
	if _, err := f.Get(filepath.Join(dir, "absent")); !os.IsNotExist(err) {
		t.Errorf("absent file: %v, want not-exist", err)
	}
}

// Unchanged vouches for a file only if Get digested it to that digest from
// a stamp that was not racy and that the file still has.
func TestFilesUnchanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.o")
	if err := os.WriteFile(p, []byte("bitcode"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFiles()
	d, err := f.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	stamp := func() plainfile.Stamp {
		_, s, err := plainfile.ReadHeadStamped(p, make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := stamp()
	if f.Unchanged(p, d, now) {
		t.Error("a file digested right after it was written was vouched for")
	}
	// As if digested long after it was written.
	e := f.m[p]
	e.trusted = !e.stamp.Racy(time.Unix(0, e.stamp.Ctime).Add(plainfile.RacyWindow))
	if !f.Unchanged(p, d, now) {
		t.Error("an unchanged file, digested long after it was written, was not vouched for")
	}
	if f.Unchanged(p, OfBytes([]byte("other")), now) || f.Unchanged(p+".x", d, now) {
		t.Error("vouched for another digest or path")
	}
	time.Sleep(10 * time.Millisecond) // past the file system's clock tick
	if err := os.WriteFile(p, []byte("BITCODE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f.Unchanged(p, d, stamp()) {
		t.Error("a rewritten file was vouched for")
	}
	var none *Files
	if none.Unchanged(p, d, now) {
		t.Error("a nil memo vouched for a file")
	}
}

func TestOfFileHead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("0123456789"), 20000) // more than one read
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 64, len(data) + 10} {
		head := make([]byte, n)
		d, got, stamp, err := OfFileHead(p, head)
		if err != nil {
			t.Fatal(err)
		}
		want := min(n, len(data))
		if d != OfBytes(data) || got != want || !bytes.Equal(head[:got], data[:want]) || stamp.Size != int64(len(data)) {
			t.Errorf("head of %d: digest ok %v, %d bytes (want %d), stamp size %d", n, d == OfBytes(data), got, want, stamp.Size)
		}
	}
}
