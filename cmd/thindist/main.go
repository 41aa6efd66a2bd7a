// Command thindist runs LLVM ThinLTO backend compilations; see
// `thindist --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/thindist/thindist/internal/cli"
)

func main() {
	// lld's process group receives SIGINT from the terminal; a build tool
	// may send SIGTERM. Either cancels the run, which stops every compiler
	// and removes every temporary file before exiting.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
