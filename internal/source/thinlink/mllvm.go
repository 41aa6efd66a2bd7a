// The linker's -mllvm options, which lld applies to its in-process
// backends, reach thindist's backends only if the compiler knows them.

package thinlink

import (
	"context"
	"fmt"
	"strings"
)

// knownMllvm returns extra (backend options, "-mllvm X" pairs among them)
// without the -mllvm options compiler does not know: lld registers options
// clang does not (its code-generation flags, such as -relocation-model), and
// clang given one of those fails. The compiler is asked once for all of
// them, and only if it refuses, once per option (`-E` of an empty file);
// the answers are kept in Options.ToolFacts. What is left out is named in a
// note. The only error is the cancellation of ctx.
func (p *plan) knownMllvm(ctx context.Context, compiler string, extra []string) ([]string, error) {
	var opts []string
	for i := 0; i+1 < len(extra); i++ {
		if extra[i] == "-mllvm" {
			opts = append(opts, extra[i+1])
			i++
		}
	}
	if len(opts) == 0 {
		return extra, nil
	}
	if ok, err := p.accepts(ctx, compiler, opts); ok || err != nil {
		return extra, err
	}
	var out, dropped []string
	for i := 0; i < len(extra); i++ {
		if extra[i] != "-mllvm" || i+1 == len(extra) {
			out = append(out, extra[i])
			continue
		}
		i++
		ok, err := p.accepts(ctx, compiler, extra[i:i+1])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, "-mllvm", extra[i])
		} else {
			dropped = append(dropped, extra[i])
		}
	}
	fmt.Fprintf(p.opts.Stderr, "thindist: note: the backends run without -mllvm %s: lld applies it to its in-process "+
		"ThinLTO, but %s does not know it\n", strings.Join(dropped, ", "), compiler)
	return out, nil
}

// accepts reports whether compiler accepts every option of opts after
// -mllvm.
func (p *plan) accepts(ctx context.Context, compiler string, opts []string) (bool, error) {
	question := "-mllvm " + strings.Join(opts, " -mllvm ")
	if f := p.opts.ToolFacts; f != nil {
		if a, ok := f.Get(compiler, question); ok {
			return a == "yes", nil
		}
	}
	cmd := []string{compiler}
	for _, o := range opts {
		cmd = append(cmd, "-mllvm", o)
	}
	_, err := p.run(ctx, append(cmd, "-E", "-x", "c", "/dev/null", "-o", "/dev/null"), nil)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	ok := err == nil
	if f := p.opts.ToolFacts; f != nil {
		f.Put(compiler, question, map[bool]string{true: "yes", false: "no"}[ok])
	}
	return ok, nil
}
