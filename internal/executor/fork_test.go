package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestLocalForks: with a fork-server pool the local executor runs the
// compiler as a child of its server, not of thindist; without one, or for
// a compiler the pool refuses (a script), it execs it as before.
func TestLocalForks(t *testing.T) {
	testprog.NeedLLVM(t, testprog.LLVMBin(), "clang")
	dir := t.TempDir()
	script := filepath.Join(dir, "cc.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $PPID\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := os.Environ()
	pool := forkserver.NewPool(t.TempDir(), env, t.Logf)
	defer pool.Close()
	pool.CC = filepath.Join(testprog.LLVMBin(), "clang") // /bin/sh cannot build the shim
	parent := func(e Executor, forked bool, argv ...string) int {
		t.Helper()
		a := &action.Action{ID: "m.o", Dir: dir}
		for _, s := range argv {
			a.Args = append(a.Args, action.Arg{Text: s})
		}
		res, err := e.Execute(t.Context(), Job{Action: a, Out: []string{filepath.Join(dir, "out.o")}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %+v %v", argv, res, err)
		}
		if want := map[bool]proc.RunBy{true: proc.ByForkServer, false: proc.ByExec}[forked]; res.By != want {
			t.Errorf("%v: Result.By %v, want %v", argv, res.By, want)
		}
		// A forked job's peak RSS is its own (see forkserver.Status).
		if forked && res.MaxRSS <= 0 {
			t.Errorf("%v: no peak RSS for a forked job", argv)
		}
		ppid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		if err != nil {
			t.Fatalf("stdout %q", res.Stdout)
		}
		return ppid
	}
	forked := NewLocal(LocalOptions{Env: env, Runner: pool.Runner(proc.Exec{}, 0)})
	plain := NewLocal(LocalOptions{Env: env})
	me := os.Getpid()
	if p := parent(forked, true, "/bin/sh", "-c", "echo $PPID"); p == me {
		t.Errorf("with a pool, the compiler is still thindist's child")
	}
	if p := parent(plain, false, "/bin/sh", "-c", "echo $PPID"); p != me {
		t.Errorf("without a pool, the compiler's parent is %d, not thindist (%d)", p, me)
	}
	if p := parent(forked, false, script); p != me {
		t.Errorf("a script compiler was not exec'd: parent %d", p)
	}
}
