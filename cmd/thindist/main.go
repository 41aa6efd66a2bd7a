// Command thindist runs LLVM ThinLTO backend compilations; see
// `thindist --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/thindist/thindist/internal/cli"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/source/linkflags"
	"github.com/thindist/thindist/internal/sys/gctune"
	"github.com/thindist/thindist/internal/sys/jobserver"
)

func main() {
	// First of all, before this process opens any file of its own: make
	// 4.3 leaves --jobserver-auth=R,W in MAKEFLAGS for a recipe without
	// '+' (CMake's link rules, Kbuild's) but closes R and W, so the next
	// files this process opens get those numbers. Some are open already:
	// the Go runtime's, before any Go code runs (the cgroup CPU limit files
	// it keeps open to follow GOMAXPROCS: cpu.max, or cpu.cfs_quota_us and
	// cpu.cfs_period_us, seen at descriptors 3 and 4 with strace), and the
	// package initialisers' (protobuf's detrand opens and closes the
	// executable, which creates the runtime poller's epoll and eventfd
	// descriptors). None of these is a pipe, and Inherit refuses them.
	// Later, thindist's own pipes to its compilers could be taken for
	// make's, which is why this cannot wait until the jobs run.
	js := jobserver.Inherit(os.Getenv("MAKEFLAGS"))
	// The garbage collector is set for each phase of a run (gctune): off
	// while thindist starts, the linker waiting. GOGC or GOMEMLIMIT
	// override it.
	gc := gctune.Start(os.Getenv)
	// lld's process group receives SIGINT from the terminal; a build tool
	// may send SIGTERM; a closed terminal or a dropped ssh connection sends
	// SIGHUP. Each cancels the run, which stops every compiler and removes
	// every temporary file before exiting (status 130).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	env := pipeline.StdEnv(js)
	env.GC = gc
	// Links start the per-user worker server as `thindist server run`.
	env.Self, _ = os.Executable()
	env.Exec = linkflags.Replace
	code := cli.Main(ctx, os.Args[1:], env)
	stop()
	os.Exit(code)
}
