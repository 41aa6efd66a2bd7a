package digest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// later is a Files clock an hour ahead: every stamp of a file written now
// is old enough to be trusted (not racy).
func later() time.Time { return time.Now().Add(time.Hour) }

func tableFiles(path string) *Files {
	f := NewFilesWith(LoadTable(path))
	f.now = later
	return f
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTableServesUnchanged: a run takes the digest of a file unchanged
// since an earlier run from the table, without reading the file. (The
// entry is doctored to tell: a read would give the file's real digest.)
func TestTableServesUnchanged(t *testing.T) {
	dir := t.TempDir()
	table, in := filepath.Join(dir, "digests"), filepath.Join(dir, "in.o")
	write(t, in, "module one")
	f := tableFiles(table)
	if d, err := f.Get(in); err != nil || d != OfBytes([]byte("module one")) {
		t.Fatalf("first run: %v %v", d, err)
	}
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	tb := LoadTable(table)
	e, ok := tb.old[in]
	if !ok {
		t.Fatalf("the table does not hold %s", in)
	}
	marker := OfBytes([]byte("from the table"))
	e.hash = marker.Hash
	tb.old[in] = e
	f = NewFilesWith(tb)
	if d, err := f.Get(in); err != nil || d.Hash != marker.Hash || d.Size != int64(len("module one")) {
		t.Errorf("second run: %v %v, want the table's digest", d, err)
	}
}

// TestTableInvalidated: a file changed since the table's entry, to the same
// size and even with its modification time set back, is read again (its
// status-change time moved); the new digest replaces the entry.
func TestTableInvalidated(t *testing.T) {
	dir := t.TempDir()
	table, in := filepath.Join(dir, "digests"), filepath.Join(dir, "in.o")
	write(t, in, "module one")
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	f := tableFiles(table)
	f.Get(in)
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	// The ctime has a coarse clock on some file systems: wait until it
	// must move.
	for st := statCtime(t, in); statCtime(t, in) == st; {
		time.Sleep(10 * time.Millisecond)
		write(t, in, "module two")
	}
	os.Chtimes(in, fi.ModTime(), fi.ModTime())
	f = tableFiles(table)
	if d, err := f.Get(in); err != nil || d != OfBytes([]byte("module two")) {
		t.Fatalf("after the change: %v %v, want the new content's digest", d, err)
	}
	f.Save()
	f = tableFiles(table)
	if d, _ := f.Get(in); d != OfBytes([]byte("module two")) {
		t.Errorf("the entry was not replaced: %v", d)
	}
}

func statCtime(t *testing.T, p string) int64 {
	t.Helper()
	_, s, err := ofFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return s.Ctime
}

// TestTableRacy: a file read while its stamp could still miss a write (it
// changed just now) is not remembered.
func TestTableRacy(t *testing.T) {
	dir := t.TempDir()
	table, in := filepath.Join(dir, "digests"), filepath.Join(dir, "in.o")
	write(t, in, "module one")
	f := NewFilesWith(LoadTable(table)) // the real clock: in.o was written just now
	f.Get(in)
	f.Save()
	if _, ok := LoadTable(table).old[in]; ok {
		t.Errorf("a racy stamp was remembered")
	}
}

// TestTableDamaged: a damaged table reads as empty, never as wrong digests;
// two runs saving at once keep both runs' entries when one saves after the
// other loaded.
func TestTableDamaged(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "digests")
	a, b := filepath.Join(dir, "a.o"), filepath.Join(dir, "b.o")
	write(t, a, "a")
	write(t, b, "b")
	fa, fb := tableFiles(table), tableFiles(table)
	fa.Get(a)
	fb.Get(b)
	if err := fa.Save(); err != nil {
		t.Fatal(err)
	}
	if err := fb.Save(); err != nil {
		t.Fatal(err)
	}
	old := LoadTable(table).old
	if len(old) != 2 {
		t.Fatalf("after two runs saved: %d entries, want 2", len(old))
	}
	data, _ := os.ReadFile(table)
	data[len(data)/2] ^= 1
	os.WriteFile(table, data, 0o644)
	if n := len(LoadTable(table).old); n != 0 {
		t.Errorf("a damaged table read as %d entries", n)
	}
}
