package thinlink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memo is a ToolFacts in memory that counts its answers.
type memo struct {
	answers map[string]string
	hits    int
}

func (m *memo) Get(tool, q string) (string, bool) {
	a, ok := m.answers[tool+" "+q]
	if ok {
		m.hits++
	}
	return a, ok
}

func (m *memo) Put(tool, q, a string) { m.answers[tool+" "+q] = a }

// TestLLDMajorRemembered: the linker's --version is asked once and then
// taken from ToolFacts; a tool that fails is not remembered, and one that
// cannot be run at all (not in PATH, not executable) is an error naming it.
func TestLLDMajorRemembered(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	ld := filepath.Join(dir, "ld.lld")
	os.WriteFile(ld, []byte("#!/bin/sh\necho x >> "+count+"\necho 'Debian LLD 22.1.8 (compatible with GNU linkers)'\n"), 0o755)
	broken := filepath.Join(dir, "broken")
	os.WriteFile(broken, []byte("#!/bin/sh\nexit 3\n"), 0o755)
	m := &memo{answers: map[string]string{}}
	p := &plan{opts: Options{ToolFacts: m, Dir: dir}}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if major, err := p.lldMajor(ctx, "./ld.lld"); err != nil || major != "22" {
			t.Fatalf("lldMajor = %q, %v; want 22", major, err)
		}
	}
	if runs, _ := os.ReadFile(count); len(runs) != 2 || m.hits != 2 {
		t.Errorf("the linker ran %d times and was remembered %d times; want once and twice", len(runs)/2, m.hits)
	}
	if _, ok := m.answers[ld+" --version"]; !ok {
		t.Errorf("remembered %v; want the answer under %s (the link's directory joined)", m.answers, ld)
	}
	for i := 0; i < 2; i++ {
		if major, _ := p.lldMajor(ctx, broken); major != "" {
			t.Errorf("a failing tool is lld %s", major)
		}
	}
	if _, ok := m.answers[broken+" --version"]; ok {
		t.Error("a tool that failed to run was remembered")
	}
	notExec := filepath.Join(dir, "not-executable")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for _, tool := range []string{"thindist-no-such-linker", filepath.Join(dir, "missing"), notExec} {
		major, err := p.lldMajor(ctx, tool)
		if err == nil || !strings.Contains(err.Error(), filepath.Base(tool)) {
			t.Errorf("lldMajor(%s) = %q, %v; want an error naming it", tool, major, err)
		}
		if _, ok := m.answers[tool+" --version"]; ok {
			t.Errorf("%s, which cannot run, was remembered", tool)
		}
	}
	// Without ToolFacts, every link asks.
	p.opts.ToolFacts = nil
	p.lldMajor(ctx, ld)
	if runs, _ := os.ReadFile(count); len(runs) != 4 {
		t.Errorf("without ToolFacts the linker ran %d times in all; want 2", len(runs)/2)
	}
}
