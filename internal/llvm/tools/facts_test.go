package tools

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFacts: an answer is remembered for the executable's content,
// through a symbolic link too; a changed executable, another question or
// a script gets none.
func TestFacts(t *testing.T) {
	dir := t.TempDir()
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	tool := filepath.Join(dir, "ld.lld")
	if err := os.WriteFile(tool, elf, 0o755); err != nil {
		t.Fatal(err)
	}
	facts := func() *Facts {
		return NewFacts(NewIDs(filepath.Join(dir, "ids")), filepath.Join(dir, "facts"))
	}
	if _, ok := facts().Get(tool, "--version"); ok {
		t.Fatal("an answer before any was given")
	}
	facts().Put(tool, "--version", "22")
	if a, ok := facts().Get(tool, "--version"); !ok || a != "22" {
		t.Errorf("Get = %q, %v; want 22", a, ok)
	}
	if _, ok := facts().Get(tool, "--help"); ok {
		t.Error("an answer to another question")
	}
	ln := filepath.Join(dir, "ld")
	os.Symlink(tool, ln)
	if a, ok := facts().Get(ln, "--version"); !ok || a != "22" {
		t.Errorf("through a symbolic link: %q, %v; want 22", a, ok)
	}
	// "Not lld" is an answer too.
	facts().Put(ln, "--version", "")
	if a, ok := facts().Get(tool, "--version"); !ok || a != "" {
		t.Errorf("Get = %q, %v; want the empty answer", a, ok)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(tool, append(elf, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := facts().Get(tool, "--version"); ok {
		t.Error("a changed executable kept its answer")
	}
	script := filepath.Join(dir, "ld-wrapper")
	os.WriteFile(script, []byte("#!/bin/sh\nexec ld.lld \"$@\"\n"), 0o755)
	facts().Put(script, "--version", "22")
	if _, ok := facts().Get(script, "--version"); ok {
		t.Error("a script's answer was remembered")
	}
}
