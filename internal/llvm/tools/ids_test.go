package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIDs: the identity follows the content, whatever the path's
// size and time, and the on-disk memo is used while they are unchanged.
func TestIDs(t *testing.T) {
	dir := t.TempDir()
	cc := filepath.Join(dir, "cc")
	os.WriteFile(cc, []byte("#!/bin/sh\n# A\n"), 0o755)
	memo := filepath.Join(dir, "memo")
	id1, err := NewIDs(memo).ID(cc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id1, "sha256:") {
		t.Errorf("id %q", id1)
	}
	if id, _ := NewIDs(memo).ID(cc); id != id1 {
		t.Errorf("same compiler, other id: %s vs %s", id, id1)
	}
	// New content of the same size (a rebuilt compiler).
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(cc, []byte("#!/bin/sh\n# B\n"), 0o755)
	id2, err := NewIDs(memo).ID(cc)
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id1 {
		t.Error("a changed compiler kept its identity")
	}
	// Through a symlink: the identity of what it points to.
	ln := filepath.Join(dir, "cc-link")
	os.Symlink(cc, ln)
	if id, _ := NewIDs(memo).ID(ln); id != id2 {
		t.Errorf("through a symlink: %s, want %s", id, id2)
	}
	if _, err := NewIDs(memo).ID(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing compiler has an identity")
	}
}
