// Running the linker for the thin and final links.

package thinlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
)

// run runs a link command in the link's directory and returns its
// messages (stderr, then stdout unless stdout is given). The linker runs
// as the backends do (internal/local/proc): in a process group of its own, so an
// interrupt stops the driver and the lld it started alike, and dying with
// thindist. The error wraps the cancellation, if that is what stopped it.
func (p *plan) run(ctx context.Context, argv []string, stdout io.Writer) (string, error) {
	return p.runWith(ctx, argv, stdout, nil)
}

// runWith is run, with files as the linker's descriptors 3, 4, ...
func (p *plan) runWith(ctx context.Context, argv []string, stdout io.Writer, files []*os.File) (string, error) {
	if p.opts.Verbose {
		fmt.Fprintf(p.opts.Stderr, "thindist: running %s\n", action.ShellQuote(argv))
	}
	res, err := proc.Exec{}.Run(ctx, &proc.Cmd{Argv: argv, Dir: p.opts.Dir, Stdout: stdout, ExtraFiles: files})
	var out string
	if res != nil {
		out = string(res.Stderr) + string(res.Stdout)
	}
	if err == nil && res.Failed() {
		err = errors.New(res.Status())
	}
	return out, err
}
