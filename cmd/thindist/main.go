// Command thindist runs LLVM ThinLTO backend compilations; see
// `thindist --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/thindist/thindist/internal/cli"
)

func main() {
	// thindist's heap is mostly short-lived garbage from starting
	// processes, while its live data (the actions) is small. A lower GC
	// target keeps its peak memory small beside the compilers it runs
	// (10,000 jobs: 42 MiB at the default, 36 MiB here) for a CPU cost far
	// below a millisecond per job. GOGC still overrides it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	// lld's process group receives SIGINT from the terminal; a build tool
	// may send SIGTERM; a closed terminal or a dropped ssh connection sends
	// SIGHUP. Each cancels the run, which stops every compiler and removes
	// every temporary file before exiting (status 130).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := cli.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
