package realproj

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestLuaWorkerByteIdentical: Debian's lua5.4 linked with `thindist link`
// on a worker gets every native object byte-identical to exec'd clang's,
// and the record says the worker compiled all of them.
func TestLuaWorkerByteIdentical(t *testing.T) {
	w := testprog.Worker(t)
	tc, tmp, thindist, b := setupLua(t)
	workerByteIdentical(t, tc, w, thindist, tmp, b, 1)
}

// TestSevenZipWorkerByteIdentical: 7-Zip's 7zz (311 C++ and C modules with
// debug info, Debian's p7zip sources) linked with `thindist link` on
// workers gets every native object byte-identical to exec'd clang's, and
// the record says the workers compiled all of them.
func TestSevenZipWorkerByteIdentical(t *testing.T) {
	w := testprog.Worker(t)
	src := needSource(t, SevenZipPackage)
	tc := needToolchain(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	thindist, err := testprog.BuildThindist(tmp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildSevenZip(ctx, tc, src, filepath.Join(tmp, "build"))
	if err != nil {
		t.Fatal(err)
	}
	workerByteIdentical(t, tc, w, thindist, tmp, b, runtime.NumCPU())
}

// workerByteIdentical links b twice with `thindist link --jobs=jobs`,
// without a worker (exec'd or forked clang) and on the worker w, and
// requires the same native object for every module, each compiled by the
// worker in the second link as its record says.
func workerByteIdentical(t *testing.T, tc Toolchain, w, thindist, tmp string, b *Build, jobs int) {
	t.Helper()
	var trees [2]map[string][]byte
	for i, flag := range []string{"--no-worker", "--worker=" + w} {
		name := []string{"exec", "worker"}[i]
		keep := filepath.Join(tmp, name)
		cache := filepath.Join(tmp, "cache-"+name)
		// --worker-idle=0: the link's own workers, no per-user server.
		args := append([]string{"link", fmt.Sprintf("--jobs=%d", jobs), flag, "--worker-idle=0", "--keep-native-objects=" + keep,
			"--cache-dir=" + cache, "--", tc.Clang}, b.LinkArgs(b.Name+"-"+name)...)
		runIn(t, b.Dir, thindist, args...)
		trees[i] = testprog.ReadTree(t, keep)
		out, _ := runIn(t, b.Dir, thindist, "report", "--json", "--cache-dir="+cache)
		var run record.Run
		if err := json.Unmarshal([]byte(out), &run); err != nil {
			t.Fatal(err)
		}
		for _, a := range run.Actions {
			if a.Worker != (i == 1) {
				t.Errorf("%s: %s on a worker: %v (why not: %q)", flag, a.Module, a.Worker, a.NotWorker)
			}
		}
	}
	if len(trees[0]) != b.Modules || len(trees[1]) != b.Modules {
		t.Fatalf("%d and %d native objects kept, want %d", len(trees[0]), len(trees[1]), b.Modules)
	}
	differ := 0
	for name, obj := range trees[0] {
		if !bytes.Equal(obj, trees[1][name]) {
			if differ++; differ <= 10 {
				t.Errorf("%s differs on the worker", name)
			}
		}
	}
	if differ > 10 {
		t.Errorf("... %d native objects differ in all", differ)
	}
}
