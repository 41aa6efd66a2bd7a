package remote

import (
	"context"
	"fmt"
	"strings"
)

// WorkersCompiler runs compiler --version on a worker and returns the
// first line it printed. It is an error when that fails or, localVer set,
// when the worker's compiler reports another version than the local one
// (local, which printed localVer first): a ThinLTO backend needs the
// version of LLVM that wrote the bitcode, and one of another version
// fails on it or compiles it otherwise. `thindist doctor` and a link
// with --remote-compiler ask it.
func (e *Executor) WorkersCompiler(ctx context.Context, compiler, local, localVer string) (string, error) {
	res, err := e.RunCommand(ctx, []string{compiler, "--version"})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s --version exited %d on the worker: %s", compiler, res.ExitCode,
			strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return "", err
	}
	remoteVer := FirstLine(string(res.Stdout))
	if localVer != "" && remoteVer != localVer {
		err = fmt.Errorf("the workers' %s reports %q, the local %s %q: DTLTO needs the same version (set --remote-compiler or the platform's container image)",
			compiler, remoteVer, local, localVer)
	}
	return remoteVer, err
}

// FirstLine is the first line of what a tool printed, without spaces
// around it: its --version's name and number.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
