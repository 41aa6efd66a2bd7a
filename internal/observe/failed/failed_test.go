package failed

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// keptAction is an action whose "compiler" is this machine's /bin/sh,
// copying its module to its output.
func keptAction(t *testing.T) *action.Action {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.o"), []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &action.Action{
		ID: "m.o", Dir: dir,
		Args:    []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit(`cp "$1" "$2"`), action.Lit("sh"), action.In("", 0), action.Out("", 0)},
		Inputs:  []action.Input{{Path: "m.o", Role: action.RoleModule}},
		Outputs: []action.Output{{Path: "m.o.native.o"}},
	}
}

// TestKeepRerunsWhatRan: the kept rerun.sh runs the command that failed
// with the compiler that ran it: the action's own, or a remote worker's
// (--remote-compiler), which it names; when that one is not on the
// machine running the script, it says so and fails instead of running
// another (issue 48, item 3: it ran the local clang 22 and succeeded).
func TestKeepRerunsWhatRan(t *testing.T) {
	a := keptAction(t)
	run := func(compiler string) (string, string, error) {
		t.Helper()
		dir, err := Keep(t.TempDir(), 0, a, compiler)
		if err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "rerun.sh")
		text, _ := os.ReadFile(script)
		out, err := exec.Command(script).CombinedOutput()
		return string(text), string(out), err
	}
	if text, out, err := run(""); err != nil || strings.Contains(text, "remote worker") {
		t.Errorf("the action's own command: %v\n%s\n%s", err, out, text)
	}
	// The worker's compiler, here too (the same /bin/sh by another name).
	sh := filepath.Join(t.TempDir(), "workers-sh")
	if err := os.Symlink("/bin/sh", sh); err != nil {
		t.Fatal(err)
	}
	if text, out, err := run(sh); err != nil || !strings.Contains(text, "exec "+sh+" ") || !strings.Contains(text, "remote worker") {
		t.Errorf("with the workers' compiler %s: %v\n%s\n%s", sh, err, out, text)
	}
	// Not here: said, and not replaced by this machine's.
	missing := "/nonexistent/workers/clang-19"
	text, out, err := run(missing)
	var exit *exec.ExitError
	if !strings.Contains(text, "exec "+missing+" ") || err == nil || !errors.As(err, &exit) || exit.ExitCode() != 127 ||
		!strings.Contains(out, missing+", the compiler that ran m.o on the remote worker, is not on this machine") {
		t.Errorf("with a workers' compiler not on this machine: %v\n%s\n%s", err, out, text)
	}
}
