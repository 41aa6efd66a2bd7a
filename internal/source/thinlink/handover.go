// Links that thindist leaves to the linker, to run as they were given.

package thinlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// Handover is a link that thindist leaves to the linker, to run exactly as
// it was given, for one of two reasons:
//   - none of its inputs holds bitcode (`ld.lld --version`, Kbuild's vDSO
//     and boot code links): there is nothing to distribute, and one LD=
//     serves a whole build;
//   - its bitcode totals less than Options.InProcessBelow: lld's in-process
//     ThinLTO, whose objects thindist's defaults reproduce, then costs less
//     than distributing them. A distributed link runs lld in two phases
//     with the distributor between them and sends every backend to a
//     worker; each step costs a few milliseconds whatever the size of the
//     modules, which is more than the backends of a link this small cost
//     (a kernel module's .ko link, a test program).
type Handover struct {
	Dir    string   // the directory the link runs in
	Argv   []string // the link command, as given
	Output string   // its -o, as the command spells it
	// Bitcode is the size in bytes of the link's bitcode inputs (objects
	// and archive members), Modules their number: 0 for a link without
	// bitcode.
	Bitcode int64
	Modules int
}

// InProcess reports whether the link is left to lld's in-process ThinLTO
// (the second reason), rather than holding no bitcode.
func (h Handover) InProcess() bool { return h.Modules > 0 }

// handOver runs the link as it was given: through Options.Exec if set,
// which replaces this process, else as a child whose messages it passes on.
func (p *plan) handOver(ctx context.Context, h Handover) error {
	step := "the link (run unchanged: no input holds bitcode)"
	if h.InProcess() {
		step = fmt.Sprintf("the link (run unchanged, lld's in-process ThinLTO: %s of bitcode, under --in-process-below)", Size(h.Bitcode))
	}
	if p.opts.Exec != nil {
		if p.opts.Verbose {
			fmt.Fprintf(p.opts.Stderr, "thindist: running %s\n", action.ShellQuote(h.Argv))
		}
		err := p.opts.Exec(h)
		if err == nil {
			err = errors.New("Options.Exec returned")
		}
		return &Error{Step: step, Err: fmt.Errorf("running %s: %w", h.Argv[0], err)}
	}
	out, err := p.run(ctx, h.Argv, p.opts.Stdout)
	io.WriteString(p.opts.Stderr, out)
	if err != nil {
		return &Error{Step: step, Err: err}
	}
	return nil
}

// leftToLinker returns the Handover of a link that thindist leaves to the
// linker, or nil for a link it distributes. The bitcode is measured only
// when its size decides.
func (p *plan) leftToLinker() *Handover {
	h := &Handover{Dir: p.opts.Dir, Argv: p.opts.Command, Output: p.line.output}
	switch {
	case len(p.bitcode) == 0:
		return h
	case p.opts.InProcessBelow <= 0:
		return nil
	}
	for _, in := range p.bitcode {
		if in.ar == nil {
			if fi, err := os.Stat(p.abs(in.path)); err == nil {
				h.Bitcode += fi.Size()
			}
			h.Modules++
			continue
		}
		for _, m := range in.ar.Members {
			if m.Bitcode {
				h.Bitcode += m.Size
				h.Modules++
			}
		}
	}
	if h.Bitcode >= p.opts.InProcessBelow {
		return nil
	}
	return h
}

// Size spells a number of bytes for people: "812 B", "6.8 KiB", "256 KiB",
// "3.4 MiB".
func Size(n int64) string {
	unit, div := "B", int64(1)
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if n < div<<10 {
			break
		}
		unit, div = u, div<<10
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + unit
}
