package toolchain

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// TestDigestsRememberedAcrossRuns: a second run's tree is the first's,
// with nothing hashed again; a changed library gives a new tree, and only
// it is hashed again.
func TestDigestsRememberedAcrossRuns(t *testing.T) {
	needClang(t)
	dir := t.TempDir()
	lib := build(t, dir, "lib/libtcfoo.so", "int foo(void){return 7;}", "-shared", "-fPIC")
	exe := build(t, dir, "bin/prog", "int foo(void); int main(void){return foo();}",
		"-L"+filepath.Join(dir, "lib"), "-ltcfoo", "-Wl,-rpath,$ORIGIN/../lib")
	memo := filepath.Join(dir, "digests")

	// The files were just written: their stamps tell their content once
	// they are older than plainfile.RacyWindow.
	time.Sleep(plainfile.RacyWindow)
	// Each run has its own digest.Files over the cache's table, saved at
	// its end, as the pipeline's.
	var files *digest.Files
	digests := func() *Digests {
		if files != nil {
			files.Save()
		}
		files = digest.NewFilesWith(digest.LoadTable(memo))
		return NewDigests(files)
	}
	cold, err := digests().Tree(exe)
	if err != nil {
		t.Fatal(err)
	}
	if cold.Hashed != cold.Bytes || cold.Count < 3 {
		t.Errorf("cold: hashed %d of %d bytes, %d files", cold.Hashed, cold.Bytes, cold.Count)
	}
	d := digests()
	warm, err := d.Tree(exe)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Hashed != 0 || warm.Root != cold.Root {
		t.Errorf("warm: hashed %d bytes, root %s, want 0 and %s", warm.Hashed, warm.Root, cold.Root)
	}
	if again, _ := d.Tree(exe); again != warm {
		t.Error("a run builds the tree of one compiler twice")
	}

	// The loader ignores the byte: the library still loads, and the tree
	// is another.
	data, _ := os.ReadFile(lib)
	os.Remove(lib)
	os.WriteFile(lib, append(data, 0), 0o755)
	changed, err := digests().Tree(exe)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Root == cold.Root {
		t.Error("a changed library kept the tree's digest")
	}
	if changed.Hashed != int64(len(data)+1) {
		t.Errorf("hashed %d bytes after one library changed, want its %d", changed.Hashed, len(data)+1)
	}
}

// TestTreeArgv: the command starts the shipped loader beside the shipped
// compiler, on the shipped libraries' directories, with the name it was
// invoked by as argv[0]; every path in the tree.
func TestTreeArgv(t *testing.T) {
	needClang(t)
	dir := t.TempDir()
	inv := filepath.Join(dir, "clang-22")
	os.Symlink(clang22, inv)
	tr, err := NewDigests(nil).Tree(inv)
	if err != nil {
		t.Fatal(err)
	}
	argv := tr.Argv("../..")
	want := []string{"../../" + Dir + "/usr/lib/llvm-22/bin/" + LoaderName, "--library-path"}
	if !slices.Equal(argv[:2], want) {
		t.Fatalf("argv %q, want it to start %q", argv, want)
	}
	for _, d := range strings.Split(argv[2], ":") {
		if !strings.HasPrefix(d, "../../"+Dir+"/") {
			t.Errorf("library directory %s is not in the tree", d)
		}
	}
	if tr.argv0 {
		if i := slices.Index(argv, "--argv0"); i < 0 || argv[i+1] != "../../"+Dir+inv {
			t.Errorf("argv %q: want --argv0 %s", argv, "../../"+Dir+inv)
		}
	}
	if argv[len(argv)-1] != "../../"+Dir+clang22 {
		t.Errorf("argv %q ends with %s, want the shipped compiler", argv, argv[len(argv)-1])
	}
}

// TestTreeShipsEnv: the tree carries Env at the input root as this
// machine has it: the executable at its path, the loader at the path it
// names, its libraries where the loader finds them, all among the files
// uploaded.
func TestTreeShipsEnv(t *testing.T) {
	needClang(t)
	env, err := Find(Env)
	if err != nil || env.Interp == "" {
		t.Skipf("%s is not a dynamically linked executable here (%v)", Env, err)
	}
	tr, err := NewDigests(nil).Tree(clang22)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]bool{}
	for _, f := range tr.RootFiles {
		if _, ok := tr.Files[f.Digest]; !ok {
			t.Errorf("%s is not among the files to upload", f.Path)
		}
		at[f.Path] = f.Executable
	}
	if !at["usr/bin/env"] || !at[strings.TrimPrefix(env.Interp, "/")] {
		t.Errorf("root files %v: want usr/bin/env and the loader %s, executable", at, env.Interp)
	}
	for _, l := range env.Libs {
		if _, ok := at[strings.TrimPrefix(l.Path, "/")]; !ok {
			t.Errorf("root files %v lack %s", at, l.Path)
		}
	}
	if sh := tr.Shipped(); len(sh.AtRoot) != len(tr.RootFiles) {
		t.Errorf("the shipped tree places %d files at the root, want %d", len(sh.AtRoot), len(tr.RootFiles))
	}
}
