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
//
// Two processes, run at once: `path --probe compiler`, and `compiler -v
// -print-resource-dir`, which prints its version line on stderr (-v) and
// its resource directory on stdout.
func Check(ctx context.Context, path, compiler, dir string, env []string) string {
	type output struct {
		stdout, stderr string
		err            error
	}
	run := func(argv ...string) chan output {
		ch := make(chan output, 1)
		go func() {
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = dir, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil {
				err = fmt.Errorf("%s: %v %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
			}
			ch <- output{stdout.String(), stderr.String(), err}
		}()
		return ch
	}
	probeCh, clangCh := run(path, "--probe", compiler), run(compiler, "-v", "-print-resource-dir")
	probe, clang := <-probeCh, <-clangCh
	if probe.err != nil {
		return fmt.Sprintf("the worker cannot be run (%v)", probe.err)
	}
	want := strings.SplitN(probe.stdout, "\n", 3)
	if len(want) < 2 {
		return fmt.Sprintf("the worker's probe printed %q", probe.stdout)
	}
	if clang.err != nil {
		return fmt.Sprintf("cannot ask the compiler its version and resource directory (%v)", clang.err)
	}
	if v, _, _ := strings.Cut(clang.stderr, "\n"); v != want[0] {
		return fmt.Sprintf("%s is %q, the worker is built for %q", compiler, v, want[0])
	}
	if r := strings.TrimSpace(clang.stdout); r != want[1] {
		return fmt.Sprintf("%s's resource directory is %s, the worker's would be %s", compiler, r, want[1])
	}
	return ""
}
