package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemberNames: with an absolute -o in another directory, lld copies
// archive members there under the archive's base name and temporary names
// ("OUT/libutil.a(util.o at 78).2.2AE9.o"); the record, the summary and the
// trace name the member after the archive the user linked,
// "lib/libutil.a(util.o)", and never after lld's copy.
func TestMemberNames(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache, outDir := t.TempDir(), t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	if err := os.Mkdir(filepath.Join(dir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "libutil.a"), filepath.Join(dir, "lib", "libutil.a")); err != nil {
		t.Fatal(err)
	}
	tracePath := filepath.Join(outDir, "trace.json")
	link := func(args ...string) {
		t.Helper()
		args = append([]string{"-Xthinlto-distributor=--trace=" + tracePath, "main.o", "-o", filepath.Join(outDir, "app")}, args...)
		if b, err := dtltoRun(t, dir, cache, args...); err != nil {
			t.Fatalf("link: %v\n%s", err, b)
		}
	}
	const want = "lib/libutil.a(util.o)"
	for _, args := range [][]string{{"lib/libutil.a"}, {"-Llib", "-lutil", "-O3"}} {
		link(args...)
		run := lastRecord(t, dir, cache)
		var names []string
		for _, a := range run.Actions {
			names = append(names, a.Module)
		}
		if got := strings.Join(names, " "); got != "main.o "+want && got != want+" main.o" {
			t.Errorf("%q: the record names the modules %s, want main.o and %s", args, got, want)
		}
		for m := range run.Contents {
			if m != "main.o" && m != want {
				t.Errorf("%q: the record names an import %q", args, m)
			}
		}
		if !strings.Contains(run.Log, "slowest") {
			t.Errorf("%q: no slowest module in the summary:\n%s", args, run.Log)
		}
		if strings.Contains(run.Log, " at ") || strings.Contains(run.Log, outDir+"/libutil") {
			t.Errorf("%q: the summary names lld's copies:\n%s", args, run.Log)
		}
		data, err := os.ReadFile(tracePath)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			TraceEvents []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"traceEvents"`
		}
		if err := json.Unmarshal(data, &tr); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range tr.TraceEvents {
			if e.Name == want {
				found = true
			}
			if strings.Contains(e.Name, " at ") || strings.Contains(e.Name, outDir+"/libutil") {
				t.Errorf("%q: trace event %q", args, e.Name)
			}
			if m, ok := e.Args["module"].(string); ok && m != want && m != "main.o" {
				t.Errorf("%q: trace event %q for module %q", args, e.Name, m)
			}
		}
		if !found {
			t.Errorf("%q: no trace event named %s", args, want)
		}
	}
}
