package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func section(parts ...Part) string {
	var b strings.Builder
	b.WriteString(Begin + "\n")
	for _, p := range parts {
		b.WriteString(p.block())
	}
	b.WriteString(End + "\n")
	return b.String()
}

// TestSpliceParts: measuring one part replaces that part alone; the other
// parts, and the text outside the section, stay; a part not there yet goes
// where Order puts it.
func TestSpliceParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	old := "# results\n\nwritten by hand\n\n" +
		section(Part{"machine", "old machine\n"}, Part{"links", "old links\n"}, Part{"overhead", "old overhead\n"}) +
		"\n## findings by hand\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SpliceParts(path, []Part{{"machine", "new machine\n"}, {"overhead", "new overhead\n"}, {"cache", "new cache\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# results\n\nwritten by hand\n\n" +
		section(Part{"machine", "new machine\n"}, Part{"links", "old links\n"}, Part{"cache", "new cache\n"}, Part{"overhead", "new overhead\n"}) +
		"\n## findings by hand\n"
	if string(got) != want {
		t.Errorf("after splicing:\n%s\nwant:\n%s", got, want)
	}
}

// TestSplicePartsOldSection: a generated section without part markers
// (written before parts had them) is replaced whole, once.
func TestSplicePartsOldSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	old := "intro\n" + Begin + "\n### Link wall time\nold table\n" + End + "\nafter\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SpliceParts(path, []Part{{"overhead", "new overhead\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "intro\n" + section(Part{"overhead", "new overhead\n"}) + "after\n"; string(got) != want {
		t.Errorf("after splicing:\n%q\nwant:\n%q", got, want)
	}
}

// TestSpliceNewFile: a missing results file is created; one that cannot be
// read is left alone.
func TestSpliceNewFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "RESULTS.md")
	if err := SpliceParts(path, []Part{{"links", "links\n"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "# thindist benchmark results\n\n" + section(Part{"links", "links\n"}); string(got) != want {
		t.Errorf("new file:\n%q\nwant:\n%q", got, want)
	}
	if err := SpliceMarkdown(dir, ClusterBegin, ClusterEnd, "x\n"); err == nil {
		t.Error("a path that cannot be read as a file was written over")
	}
}
