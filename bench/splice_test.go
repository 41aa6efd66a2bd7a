package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func section(parts ...part) string {
	var b strings.Builder
	b.WriteString(beginMarker + "\n")
	for _, p := range parts {
		b.WriteString(p.block())
	}
	b.WriteString(endMarker + "\n")
	return b.String()
}

// TestSpliceParts: measuring one part replaces that part alone; the other
// parts, and the text outside the section, stay; a part not there yet goes
// where partOrder puts it.
func TestSpliceParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	old := "# results\n\nwritten by hand\n\n" +
		section(part{"machine", "old machine\n"}, part{"links", "old links\n"}, part{"overhead", "old overhead\n"}) +
		"\n## findings by hand\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceParts(path, []part{{"machine", "new machine\n"}, {"overhead", "new overhead\n"}, {"cache", "new cache\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# results\n\nwritten by hand\n\n" +
		section(part{"machine", "new machine\n"}, part{"links", "old links\n"}, part{"cache", "new cache\n"}, part{"overhead", "new overhead\n"}) +
		"\n## findings by hand\n"
	if string(got) != want {
		t.Errorf("after splicing:\n%s\nwant:\n%s", got, want)
	}
}

// TestSplicePartsOldSection: a generated section without part markers
// (written before parts had them) is replaced whole, once.
func TestSplicePartsOldSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	old := "intro\n" + beginMarker + "\n### Link wall time\nold table\n" + endMarker + "\nafter\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceParts(path, []part{{"overhead", "new overhead\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "intro\n" + section(part{"overhead", "new overhead\n"}) + "after\n"; string(got) != want {
		t.Errorf("after splicing:\n%q\nwant:\n%q", got, want)
	}
}

// TestSpliceNewFile: a missing results file is created; one that cannot be
// read is left alone.
func TestSpliceNewFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "RESULTS.md")
	if err := spliceParts(path, []part{{"links", "links\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "# thindist benchmark results\n\n" + section(part{"links", "links\n"}); string(got) != want {
		t.Errorf("new file:\n%q\nwant:\n%q", got, want)
	}
	if err := spliceMarkdown(dir, clusterBeginMarker, clusterEndMarker, "x\n"); err == nil {
		t.Error("a path that cannot be read as a file was written over")
	}
}
