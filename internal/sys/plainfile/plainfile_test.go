package plainfile

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 100000} {
		data := make([]byte, size)
		rand.Read(data)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Errorf("size %d: %d bytes, %v", size, len(got), err)
		}
		var buf bytes.Buffer
		n, before, err := Copy(&buf, p, make([]byte, 100))
		if err != nil || n != int64(size) || !bytes.Equal(buf.Bytes(), data) || before.Size != int64(size) {
			t.Errorf("Copy of %d bytes: %d, %+v, %v", size, n, before, err)
		}
		head := make([]byte, 64)
		m, err := ReadHead(p, head)
		if err != nil || m != min(64, size) || !bytes.Equal(head[:m], data[:m]) {
			t.Errorf("ReadHead of %d bytes: %d, %v", size, m, err)
		}
		m, after, err := ReadHeadStamped(p, head)
		if err != nil || m != min(64, size) || !bytes.Equal(head[:m], data[:m]) || after != before {
			t.Errorf("ReadHeadStamped of %d bytes: %d, %+v (stamped %+v before), %v", size, m, after, before, err)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ReadFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadHead(missing, make([]byte, 1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("a directory was read as a file")
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := make([]byte, 70000)
	rand.Read(data)
	if err := Create(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Errorf("%d bytes, %v", len(got), err)
	}
	if err := Create(p, []byte("x"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing file: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Error("a failed Create changed the file")
	}
}

// A stamp changes with every write that could change the content, and a
// stamp taken soon after the write that set it is racy.
func TestStamp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, first, err := Copy(io.Discard, p, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Racy(time.Now()) {
		t.Errorf("a stamp taken right after the write is not racy: %+v", first)
	}
	if first.Racy(time.Unix(0, first.Ctime).Add(RacyWindow)) {
		t.Errorf("a stamp taken %v after the write is racy", RacyWindow)
	}
	// The same size, another content, and the old modification time put
	// back: the inode's change time still differs.
	old := time.Unix(0, first.Mtime)
	time.Sleep(10 * time.Millisecond) // past the file system's clock tick
	if err := os.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	_, second, err := ReadHeadStamped(p, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if second.Mtime != first.Mtime || second.Size != first.Size {
		t.Fatalf("setup: %+v then %+v", first, second)
	}
	if second == first {
		t.Errorf("a rewrite left the stamp as it was: %+v", second)
	}
	// Replaced by another file (rename over it): another inode.
	q := p + ".new"
	if err := os.WriteFile(q, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if _, third, err := ReadHeadStamped(p, make([]byte, 16)); err != nil || third.Ino == second.Ino {
		t.Errorf("a file renamed over another kept its inode: %+v, %v", third, err)
	}
}
