package jobfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestNameMembers: lld's copies of archive members are named after the
// archive the link line names (a path, or -l in an -L directory), else its
// base name; other modules keep their names.
func TestNameMembers(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"lib/libu.a", "other/libv.a", "a/libw.a", "b/libw.a"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte("!<arch>\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	linker := []string{"ld.lld", "-o", "/out/app", "main.o", "lib/libu.a", "-L", "other", "-lv", "a/libw.a", "b/libw.a"}
	for id, want := range map[string]string{
		"/out/libu.a(u.o at 78).2.2AE9.o":   "lib/libu.a(u.o)",
		"/out/libv.a(v.o at 1024).3.2AE9.o": "other/libv.a(v.o)",
		"/out/libw.a(w.o at 88).4.2AE9.o":   "libw.a(w.o)", // two archives of that name
		"/out/libx.a(x.o at 88).5.2AE9.o":   "libx.a(x.o)", // none on the line
		"main.o":                            "main.o",
		"thin/libt.a(t.o)":                  "thin/libt.a(t.o)",
	} {
		a := &action.Action{ID: id}
		NameMembers([]*action.Action{a}, linker, dir)
		if a.ID != want {
			t.Errorf("%s named %q, want %q", id, a.ID, want)
		}
	}
}
