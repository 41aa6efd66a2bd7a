package worker

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Check reports why the worker at path cannot stand in for compiler (a
// path or a name looked up in env's PATH, run from dir), "" when it can:
// the compiler's version line and resource directory must be the very ones
// the worker's own clang libraries report for that compiler. A worker built
// against another LLVM, a compiler that is a wrapper script, or one that
// cannot be run fails the check.
func Check(ctx context.Context, path, compiler, dir string, env []string) string {
	run := func(argv ...string) (string, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s: %v %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return string(out), nil
	}
	probe, err := run(path, "--probe", compiler)
	if err != nil {
		return fmt.Sprintf("the worker cannot be run (%v)", err)
	}
	want := strings.SplitN(probe, "\n", 3)
	if len(want) < 2 {
		return fmt.Sprintf("the worker's probe printed %q", probe)
	}
	version, err := run(compiler, "--version")
	if err != nil {
		return fmt.Sprintf("cannot ask the compiler its version (%v)", err)
	}
	if v, _, _ := strings.Cut(version, "\n"); v != want[0] {
		return fmt.Sprintf("%s is %q, the worker is built for %q", compiler, v, want[0])
	}
	res, err := run(compiler, "-print-resource-dir")
	if err != nil {
		return fmt.Sprintf("cannot ask the compiler its resource directory (%v)", err)
	}
	if r := strings.TrimSpace(res); r != want[1] {
		return fmt.Sprintf("%s's resource directory is %s, the worker's would be %s", compiler, r, want[1])
	}
	return ""
}
