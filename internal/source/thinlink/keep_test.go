package thinlink_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/source/thinlink"
)

// TestKeepNativeObjectsAtomically: --keep-native-objects writes through
// temporary files of its own, so another link's file being written into
// the same directory is left alone, and a failure leaves no temporary file.
func TestKeepNativeObjectsAtomically(t *testing.T) {
	tc := toolchains(t)[len(toolchains(t))-1]
	p := newProject(t, tc)
	kept := filepath.Join(p.dir, "kept")
	os.MkdirAll(filepath.Join(kept, "obj"), 0o755)
	// Another link keeping into the same directory is writing core.o.
	other := filepath.Join(kept, "obj", "core.o.tmp")
	os.WriteFile(other, []byte("another link's object, half written"), 0o644)
	p.mustLink(t, p.mainLink("app"), func(o *thinlink.Options) { o.KeepNativeObjects = "kept" })
	if data, err := os.ReadFile(other); err != nil || !strings.HasPrefix(string(data), "another link's") {
		t.Errorf("the other link's file %s was taken over: %v", other, err)
	}
	if _, err := os.Stat(filepath.Join(kept, "obj", "core.o")); err != nil {
		t.Errorf("core.o not kept: %v", err)
	}
	os.Remove(other)

	// main.o cannot be replaced (a directory is in the way): the link
	// fails, naming the module, and leaves no temporary file.
	os.Remove(filepath.Join(kept, "obj", "main.o"))
	os.MkdirAll(filepath.Join(kept, "obj", "main.o", "in-the-way"), 0o755)
	lr, err := p.link(t, p.mainLink("app2"), func(o *thinlink.Options) { o.KeepNativeObjects = "kept" })
	if err == nil || !strings.Contains(err.Error(), "obj/main.o") {
		t.Errorf("keeping over a directory: %v\n%s", err, lr.stderr)
	}
	filepath.WalkDir(kept, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".tmp") {
			t.Errorf("left behind: %s", path)
		}
		return nil
	})
}
