package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHealSwap: a run stopped while the changed file is in place leaves it
// there; the next run's healSwap puts the original back, and one after a
// restore changes nothing.
func TestHealSwap(t *testing.T) {
	dir := t.TempDir()
	file, orig, changed := filepath.Join(dir, "m0.o"), filepath.Join(dir, "m0.o.bench-orig"), filepath.Join(dir, "m0.o.bench-changed")
	for path, content := range map[string]string{file: "original", orig: "original", changed: "changed"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var p project
	swapFiles(&p, file, orig, changed)
	if err := p.change(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "changed" {
		t.Fatalf("after change: %q", got)
	}
	// Stopped here: no restore.
	if err := healSwap(file); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "original" {
		t.Fatalf("after healSwap: %q, want the original", got)
	}
	if err := p.change(); err != nil {
		t.Fatal(err)
	}
	if err := p.restore(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orig, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := healSwap(file); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "original" {
		t.Fatalf("healSwap after a restore changed the file to %q", got)
	}
	if err := p.restore(); err != nil {
		t.Fatalf("a second restore: %v", err)
	}
}
