package pipeline

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayers checks the import rules docs/architecture.md states of the
// layers: sys imports no other layer, only the entry points (and bench) import the
// pipeline, and no product code imports testsupport.
func TestLayers(t *testing.T) {
	const mod = "github.com/thindist/thindist/"
	root := filepath.Dir(filepath.Dir(architectureDoc))
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+"/"))
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			imp = strings.TrimPrefix(imp, mod)
			checked++
			switch {
			case strings.HasPrefix(pkg, "internal/sys/") && !strings.HasPrefix(imp, "internal/sys/"):
				t.Errorf("%s imports %s: sys imports no other layer", rel, imp)
			case imp == "internal/pipeline" && pkg != "internal/cli" && pkg != "plugin" && !strings.HasPrefix(pkg, "cmd/") && !strings.HasPrefix(pkg, "bench"):
				t.Errorf("%s imports the pipeline: only the entry points and bench do", rel)
			case strings.HasPrefix(imp, "internal/testsupport") && !strings.HasPrefix(pkg, "internal/testsupport") &&
				!strings.HasPrefix(pkg, "bench") && !strings.HasPrefix(pkg, "e2e"):
				t.Errorf("%s imports %s: the product never imports testsupport", rel, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no imports of the module's packages found: wrong root?")
	}
}
