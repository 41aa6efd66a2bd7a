package forkserver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestRunner: the pool's runner forks commands with the pool's
// environment and execs the rest (another environment, a script).
func TestRunner(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang")
	env := os.Environ()
	pool := NewPool(t.TempDir(), env, t.Logf)
	defer pool.Close()
	pool.CC = filepath.Join(llvmBin, "clang") // /bin/sh cannot build the shim
	r := pool.Runner(proc.Exec{}, 0)
	for _, c := range []struct {
		env []string
		by  proc.RunBy
	}{{env, proc.ByForkServer}, {slices.Clone(env), proc.ByExec}, {nil, proc.ByExec}} {
		res, err := r.Run(t.Context(), &proc.Cmd{Argv: []string{"/bin/sh", "-c", "echo hi; echo err >&2; exit 4"}, Env: c.env})
		if err != nil || res.By != c.by || string(res.Stdout) != "hi\n" || string(res.Stderr) != "err\n" || res.ExitCode != 4 {
			t.Errorf("by %v: %+v %v", c.by, res, err)
		}
		if c.by == proc.ByForkServer && (res.MaxRSS <= 0 || res.CPU < 0) {
			t.Errorf("no resource usage: %+v", res)
		}
	}
	// A niced (speculative) job is forked too, and lowers itself before it
	// runs: its first command already sees the niceness.
	res, err := r.Run(t.Context(), &proc.Cmd{Argv: []string{"/bin/sh", "-c", "nice"}, Env: env, Nice: 5})
	if err != nil || res.By != proc.ByForkServer || strings.TrimSpace(string(res.Stdout)) != "5" {
		t.Errorf("niced job: %+v %v; want forked at niceness 5", res, err)
	}
}
