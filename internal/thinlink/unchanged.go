// A link with no bitcode input: run as it is.

package thinlink

import (
	"context"
	"io"
)

// runUnchanged runs the command as it was given, for a link none of whose
// inputs holds bitcode (`ld.lld --version`, or Kbuild's vDSO and boot code
// links): there is nothing to distribute, so one LD= can serve a whole
// build, and such a link costs one linker run.
func (p *plan) runUnchanged(ctx context.Context) error {
	out, err := p.run(ctx, p.opts.Command, p.opts.Stdout)
	io.WriteString(p.opts.Stderr, out)
	if err != nil {
		return &Error{Step: "the link (run unchanged: no input holds bitcode)", Err: err}
	}
	return nil
}
