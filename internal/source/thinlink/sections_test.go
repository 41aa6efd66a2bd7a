package thinlink_test

import (
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/source/thinlink"
)

// functionSections counts the sections of an object that hold one
// function each (.text.NAME), as -ffunction-sections makes them.
func functionSections(t *testing.T, path string) int {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".text.") {
			n++
		}
	}
	return n
}

// TestSectionsAsCompiled: by default every backend gets the
// -ffunction-sections -fdata-sections in-process ThinLTO forces; with
// SectionsAsCompiled, each gets its module's own choice from the compile
// command (one module here asks for function sections, the others do not),
// and the program still runs. A --gc-sections link is told what it loses.
func TestSectionsAsCompiled(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		// hot.c's compile command asks for function sections; the others not.
		var entries []map[string]any
		data, _ := os.ReadFile(filepath.Join(p.dir, "compile_commands.json"))
		if err := json.Unmarshal(data, &entries); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e["file"] == "src/hot.c" {
				e["arguments"] = append(e["arguments"].([]any), "-ffunction-sections")
			}
		}
		data, _ = json.Marshal(entries)
		dbPath := filepath.Join(p.dir, "compdb-sections.json")
		os.WriteFile(dbPath, data, 0o644)
		db, err := thinlink.LoadCompDB(dbPath)
		if err != nil {
			t.Fatal(err)
		}

		p.mustLink(t, p.mainLink("app-forced"), func(o *thinlink.Options) {
			o.CompDB = db
			o.KeepNativeObjects = "keep-forced"
		})
		lr, err := p.link(t, append(p.mainLink("app-compiled"), "-Wl,--gc-sections"), func(o *thinlink.Options) {
			o.CompDB = db
			o.KeepNativeObjects = "keep-compiled"
			o.SectionsAsCompiled = true
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, lr.stderr)
		}
		mustEqual(t, "--sections-as-compiled build's output", run(t, p.dir, nil, "./app-compiled"), wantMain)
		if !strings.Contains(lr.stderr, "--gc-sections can only keep or drop whole") {
			t.Errorf("a --gc-sections link was not told what it loses:\n%s", lr.stderr)
		}

		for _, c := range []struct {
			obj            string
			forced, asComp bool // has function sections
		}{{"obj/main.o", true, false}, {"obj/core.o", true, false}, {"obj/hot.o", true, true}} {
			f := functionSections(t, filepath.Join(p.dir, "keep-forced", c.obj))
			a := functionSections(t, filepath.Join(p.dir, "keep-compiled", c.obj))
			if (f > 0) != c.forced || (a > 0) != c.asComp {
				t.Errorf("%s: %d function sections forced, %d as compiled; want forced %v, as compiled %v",
					c.obj, f, a, c.forced, c.asComp)
			}
		}
		// Without a database, no module gets function sections.
		p.mustLink(t, p.mainLink("app-none"), func(o *thinlink.Options) {
			o.KeepNativeObjects = "keep-none"
			o.SectionsAsCompiled = true
		})
		mustEqual(t, "--sections-as-compiled build's output", run(t, p.dir, nil, "./app-none"), wantMain)
		if n := functionSections(t, filepath.Join(p.dir, "keep-none", "obj/hot.o")); n != 0 {
			t.Errorf("hot.o without a database has %d function sections, want 0", n)
		}
	})
}
