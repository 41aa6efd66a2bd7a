package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/remote"
)

// shippedCompiler says how the workers get the compiler
// (--remote-toolchain) and why; when it is shipped, it builds the local
// compiler's tree and runs the shipped compiler's --version on a worker
// (uploading the tree, as the first link would), checked against the
// local one. It reports whether it has checked the workers' compiler: if
// not (installed, or a compiler that cannot be shipped), the caller checks
// the installed one.
func (r *doctorReport) shippedCompiler(ctx context.Context, rc *config.Remote, env pipeline.Env, client *remote.Client, local, localVer string) bool {
	ship, why := rc.ShipsToolchain()
	if !ship {
		fmt.Fprintf(r.w, "info  the workers run their installed compiler: %s\n", why)
		return false
	}
	if local == "" {
		fmt.Fprintf(r.w, "skip  shipped compiler check: no local compiler to ship (pass --compiler)\n")
		return true
	}
	start := time.Now()
	t, err := toolchain.NewDigests(nil).Tree(local)
	if err != nil {
		fmt.Fprintf(r.w, "warn  %v: the workers run their installed compiler\n", err)
		return false
	}
	fmt.Fprintf(r.w, "info  the compiler is shipped with every action as inputs: %s; %d files, %.1f MiB, digested in %v\n",
		why, t.Count, float64(t.Bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
	rex := remote.NewExecutor(client, remote.ExecOptions{Platform: rc.Platform, Env: pipeline.RemoteEnv(env.Getenv),
		Timeout: rc.ExecTimeout, ExecStall: rc.ExecStall})
	res, err := rex.RunShipped(ctx, t.Shipped(), []string{"--version"})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("the shipped %s --version exited %d on the worker: %s", local, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	ver := ""
	if err == nil {
		if ver = remote.FirstLine(string(res.Stdout)); localVer != "" && ver != localVer {
			err = fmt.Errorf("the shipped %s reports %q on the worker, %q here", local, ver, localVer)
		}
	}
	r.step("shipped compiler "+local+" on a worker", err, ": "+ver)
	return true
}
