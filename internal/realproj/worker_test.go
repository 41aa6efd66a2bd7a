package realproj

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/record"
	"github.com/thindist/thindist/internal/testprog"
)

// TestLuaWorkerByteIdentical: Debian's lua5.4 linked with `thindist link`
// on a worker gets every native object byte-identical to exec'd clang's,
// and the record says the worker compiled all of them.
func TestLuaWorkerByteIdentical(t *testing.T) {
	w := testprog.Worker(t)
	tc, tmp, thindist, b := setupLua(t)
	var trees [2]map[string][]byte
	for i, flag := range []string{"--no-worker", "--worker=" + w} {
		keep := filepath.Join(tmp, []string{"exec", "worker"}[i])
		cache := filepath.Join(tmp, "cache-"+[]string{"exec", "worker"}[i])
		// --worker-idle=0: the link's own workers, no per-user server.
		args := append([]string{"link", "--jobs=1", flag, "--worker-idle=0", "--keep-native-objects=" + keep, "--cache-dir=" + cache, "--", tc.Clang},
			b.LinkArgs("lua-"+[]string{"exec", "worker"}[i])...)
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
	for name, obj := range trees[0] {
		if !bytes.Equal(obj, trees[1][name]) {
			t.Errorf("%s differs on the worker", name)
		}
	}
}
