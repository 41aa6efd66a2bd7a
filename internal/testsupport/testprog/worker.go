package testprog

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/sys/lockfile"
	"github.com/thindist/thindist/internal/testsupport"
)

var worker struct {
	once      sync.Once
	path, out string
	err       error
}

// Worker returns the thindist-worker the tests use: $THINDIST_WORKER, else
// worker/ built in place (make keeps it up to date). It skips t where LLVM
// 22's clang headers (libclang-cpp22-dev) are not installed, and fails it
// instead under CI=true, which installs them. Its tests compile with the
// worker, and are in the full tier only: under -short it skips t.
func Worker(t testing.TB) string {
	t.Helper()
	testsupport.Slow(t, "builds worker/ (C++, against libclang 22) and compiles with it")
	if p := os.Getenv("THINDIST_WORKER"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/lib/llvm-22/include/clang/Driver/Driver.h"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and libclang-cpp22-dev is not installed: %v", err)
		}
		t.Skipf("libclang-cpp22-dev not installed: %v", err)
	}
	worker.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "worker")
		// Test packages run in parallel and each builds the worker: one
		// make at a time, so no package runs a binary another is writing
		// (the Makefile also renames it into place whole).
		var out []byte
		err := lockfile.With(filepath.Join(os.TempDir(), "thindist-worker-build.lock"), func() error {
			var err error
			out, err = exec.Command("make", "-s", "-C", dir).CombinedOutput()
			return err
		})
		worker.path, worker.out, worker.err = filepath.Join(dir, "thindist-worker"), string(out), err
	})
	if worker.err != nil {
		t.Fatalf("building the worker: %v\n%s", worker.err, worker.out)
	}
	return worker.path
}

// ReadTree reads every file under dir, by path relative to dir.
func ReadTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
