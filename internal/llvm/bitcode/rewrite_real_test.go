package bitcode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestRewriteRealRelocated: lld's shards for a link with absolute paths
// (objects named absolutely, archive members copied out beside an absolute
// -o), rewritten to name the modules by relative paths in another tree, are
// accepted by llvm-bcanalyzer, and clang's backend run there, with the
// original tree gone, gives objects byte-identical to those of the backend
// run in place. The shards not rewritten give other objects in that tree
// (the check can fail).
func TestRewriteRealRelocated(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang", "ld.lld", "llvm-bcanalyzer")
	clang := filepath.Join(llvmBin, "clang")
	ctx := context.Background()
	p, err := testprog.Generate(t.TempDir(), testprog.Options{Modules: 6, Seed: 4, ArchiveModules: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Compile(ctx, clang); err != nil {
		t.Fatal(err)
	}
	p.Objects = p.AbsObjects()
	if err := os.Mkdir(filepath.Join(p.Dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	jobFile, err := p.CaptureJobFile(ctx, clang, filepath.Join(p.Dir, "out", "prog"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(jobFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Common struct{ Args []string } `json:"common"`
		Jobs   []struct {
			Args, Inputs, Outputs []string
		} `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Jobs) != 6 {
		t.Fatalf("%d jobs", len(spec.Jobs))
	}

	// Every job in place, as lld's distributor would run it; keep what the
	// relocated runs need, then make the original tree disappear.
	type job struct {
		primary string
		shard   []byte
		files   map[string][]byte // table path -> content
		local   []byte
		args    []string
	}
	var jobs []job
	members := 0
	for i, sj := range spec.Jobs {
		argv := append(append([]string{clang}, spec.Common.Args[1:]...), sj.Args...)
		runBackend(t, p.Dir, argv)
		j := job{primary: sj.Inputs[0], files: map[string][]byte{}, args: sj.Args}
		if j.local, err = os.ReadFile(sj.Outputs[0]); err != nil || len(j.local) == 0 {
			t.Fatalf("job %d: local object: %v", i, err)
		}
		if j.shard, err = os.ReadFile(sj.Inputs[1]); err != nil {
			t.Fatal(err)
		}
		for _, in := range append([]string{sj.Inputs[0]}, sj.Inputs[2:]...) {
			if !filepath.IsAbs(in) {
				t.Fatalf("job %d: input %q is not absolute", i, in)
			}
			if strings.Contains(in, "(") {
				members++
			}
			if j.files[in], err = os.ReadFile(in); err != nil {
				t.Fatal(err)
			}
		}
		jobs = append(jobs, j)
	}
	if members < 2 {
		t.Fatalf("only %d archive members among the inputs", members)
	}
	if err := os.Rename(p.Dir, p.Dir+"-gone"); err != nil {
		t.Fatal(err)
	}

	imports := 0
	for i, j := range jobs {
		mods, err := ModuleTable(j.shard)
		if err != nil {
			t.Fatal(err)
		}
		imports += len(mods) - 1
		newPath := map[string]string{}
		for slot, m := range mods {
			newPath[m.Path] = fmt.Sprintf("m/%d.o", slot)
		}
		shard, err := RewriteModulePaths(j.shard, func(m Module) string { return newPath[m.Path] })
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if mustDigest(t, shard) != mustDigest(t, j.shard) {
			t.Errorf("job %d: the rewrite changed the normalised digest", i)
		}
		// Rewritten back, lld's own bytes (the writer picks abbreviations
		// as LLVM's does).
		oldPath := map[string]string{}
		for old, p := range newPath {
			oldPath[p] = old
		}
		if back, err := RewriteModulePaths(shard, func(m Module) string { return oldPath[m.Path] }); err != nil || !bytes.Equal(back, j.shard) {
			t.Errorf("job %d: rewritten back, the shard is not lld's (%v)", i, err)
		}
		dir := filepath.Join(t.TempDir(), "w")
		if err := os.MkdirAll(filepath.Join(dir, "m"), 0o755); err != nil {
			t.Fatal(err)
		}
		for old, data := range j.files {
			if err := os.WriteFile(filepath.Join(dir, newPath[old]), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range map[string][]byte{"index.bc": shard, "original.bc": j.shard} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		checkBcanalyzer(t, filepath.Join(dir, "index.bc"), mods, newPath)

		backend := func(index, out string) []byte {
			argv := []string{clang}
			argv = append(argv, spec.Common.Args[1:]...)
			for k := 0; k < len(j.args); k++ {
				a := j.args[k]
				switch {
				case a == j.primary:
					a = newPath[j.primary]
				case strings.HasPrefix(a, "-fthinlto-index="):
					a = "-fthinlto-index=" + index
				case a == "-o" && k+1 < len(j.args):
					argv = append(argv, a)
					a = out
					k++
				}
				argv = append(argv, a)
			}
			runBackend(t, dir, argv)
			b, _ := os.ReadFile(filepath.Join(dir, out))
			return b
		}
		if got := backend("index.bc", "native.o"); !bytes.Equal(got, j.local) {
			t.Errorf("job %d (%s): relocated object of %d bytes differs from the local one of %d", i, j.primary, len(got), len(j.local))
		}
		if got := backend("original.bc", "control.o"); bytes.Equal(got, j.local) {
			t.Errorf("job %d: the shard not rewritten gives the local object too: the test proves nothing", i)
		}
	}
	if imports == 0 {
		t.Error("no job imports anything: the test does not exercise imports")
	}
	t.Logf("%d jobs, %d archive members among their inputs, %d imports", len(jobs), members, imports)
}

// runBackend runs a backend compilation in dir; clang's silent failure
// ("Error running ThinLTO backend", exit 0) fails the test only when it
// exits non-zero: callers compare the objects.
func runBackend(t *testing.T, dir string, argv []string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", argv, err, out)
	}
}

// checkBcanalyzer: llvm-bcanalyzer reads the rewritten shard and shows the
// new paths with the old modids.
func checkBcanalyzer(t *testing.T, path string, mods []Module, newPath map[string]string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(llvmBin, "llvm-bcanalyzer"), "-dump", path).CombinedOutput()
	if err != nil {
		t.Fatalf("llvm-bcanalyzer rejects the rewritten shard: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := bcEntryRE.FindStringSubmatch(line); m != nil {
			got = append(got, m[1]+" "+m[2])
		}
	}
	var want []string
	for _, m := range mods {
		want = append(want, fmt.Sprintf("%d %s", m.ID, newPath[m.Path]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("llvm-bcanalyzer reads the entries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
