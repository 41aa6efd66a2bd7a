// Running the linker for the thin and final links.

package thinlink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// run runs a link command in the link's directory and returns its stderr.
func (p *plan) run(ctx context.Context, argv []string, stdout io.Writer) (string, error) {
	if p.opts.Verbose {
		fmt.Fprintf(p.opts.Stderr, "thindist: running %s\n", action.ShellQuote(argv))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.opts.Dir
	// On cancellation let the driver and lld remove their temporary files.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout != nil {
		cmd.Stdout = stdout
	} else {
		cmd.Stdout = &stderr
	}
	err := cmd.Run()
	return stderr.String(), err
}
