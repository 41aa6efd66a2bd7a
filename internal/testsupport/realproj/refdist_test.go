package realproj

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestLuaAsReferenceDistributor links Debian's lua5.4 through lld's DTLTO
// with LLVM's reference distributor (testprog.ServeReferenceDistributor:
// each job's `common.args + job.args`, as llvm/utils/dtlto/local.py), with
// thindist as the distributor, and with `thindist link` (one lld process):
// the three interpreters must be byte-identical, so that whatever differs
// from lld's in-process link is distributed ThinLTO's own (docs/link.md,
// "Not byte-identical to in-process"), not thindist's. How many native
// objects differ from in-process's is logged.
func TestLuaAsReferenceDistributor(t *testing.T) {
	testsupport.Slow(t, "builds lua5.4 and links it four times")
	tc, tmp, thindist, b := setupLua(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	refObjs := filepath.Join(tmp, "reference-objs")
	if err := os.Mkdir(refObjs, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tc.Clang, b.LinkArgs("lua-reference", "-fthinlto-distributor="+self)...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), testprog.ReferenceDistributorEnv+"="+refObjs)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("linking through the reference distributor: %v\n%s", err, out)
	}
	cache := "--cache-dir=" + filepath.Join(tmp, "cache")
	runIn(t, b.Dir, tc.Clang, b.LinkArgs("lua-dtlto", "-fthinlto-distributor="+thindist,
		"-Xthinlto-distributor=--jobs=2", "-Xthinlto-distributor="+cache)...)
	runIn(t, b.Dir, thindist, append([]string{"link", "--jobs=2", "--in-process-below=0", cache, "--", tc.Clang},
		b.LinkArgs("lua-link")...)...)
	read := func(name string) []byte { return readFile(t, filepath.Join(b.Dir, name)) }
	ref := read("lua-reference")
	for _, exe := range []string{"lua-dtlto", "lua-link"} {
		if !bytes.Equal(read(exe), ref) {
			t.Errorf("%s differs from lua linked through LLVM's reference distributor", exe)
		}
	}

	inObjs := filepath.Join(tmp, "inprocess-objs")
	if err := os.Mkdir(inObjs, 0o755); err != nil {
		t.Fatal(err)
	}
	runIn(t, b.Dir, tc.Clang, b.LinkArgs("lua-objs", "-Wl,--lto-obj-path="+filepath.Join(inObjs, "lto"))...)
	inProcess := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(inObjs, "lto*"))
	for _, f := range files {
		inProcess[string(readFile(t, f))] = true
	}
	objs, _ := filepath.Glob(filepath.Join(refObjs, "*"))
	if len(objs) != b.Modules {
		t.Fatalf("the reference distributor compiled %d modules, want %d", len(objs), b.Modules)
	}
	differ := 0
	for _, f := range objs {
		if !inProcess[string(readFile(t, f))] {
			differ++
		}
	}
	t.Logf("lua: %d of %d distributed native objects differ from in-process's; interpreter %d bytes, in-process %d",
		differ, len(objs), len(ref), len(read("lua-inprocess")))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
