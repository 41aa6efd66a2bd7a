package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: a hard-linked path is replaced, not written through; a failed
// write leaves the path as it was and no temporary file behind.
func TestWrite(t *testing.T) {
	dir, other, path := hardLinked(t)
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("path holds %q", got)
	}
	if got, _ := os.ReadFile(other); string(got) != "old" {
		t.Errorf("the write went through the hard link: %q", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error { w.Write([]byte("half")); return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Write returned %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("a failed write changed the path: %q", got)
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Errorf("%d files in the directory after a failed write, want 2", len(es))
	}
}

// TestWritePrivate: a path that is a hard link is replaced, not written
// through, and a path that does not exist yet is created.
func TestWritePrivate(t *testing.T) {
	dir, other, path := hardLinked(t)
	if err := WritePrivate(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("path holds %q", got)
	}
	if got, _ := os.ReadFile(other); string(got) != "old" {
		t.Errorf("the write went through the hard link: %q", got)
	}
	fresh := filepath.Join(dir, "fresh")
	if err := WritePrivate(fresh, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fresh); string(got) != "x" {
		t.Errorf("fresh holds %q", got)
	}
	if err := WritePrivate(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}

// hardLinked returns a directory holding other, with content "old", and
// path, a hard link to it (as an output linked from the cache is).
func hardLinked(t *testing.T) (dir, other, path string) {
	t.Helper()
	dir = t.TempDir()
	other = filepath.Join(dir, "other")
	path = filepath.Join(dir, "f")
	if err := os.WriteFile(other, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, path); err != nil {
		t.Fatal(err)
	}
	return dir, other, path
}
