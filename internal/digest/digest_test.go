package digest

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
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
