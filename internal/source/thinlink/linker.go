// Which linker a link command runs, and how lld's in-process LTO would
// compile its modules: asked of the tools themselves (their --version, the
// driver's -###), never guessed from their names, so that ld.lld-22,
// --ld-path=/opt/llvm/bin/ld.lld and wrapper scripts are lld too.

package thinlink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/thindist/thindist/internal/llvm/bitcode"
)

// lldVersion matches lld's --version ("Debian LLD 22.1.8 (compatible with
// GNU linkers)", "LLD 19.1.7"); the group is the major version.
var lldVersion = regexp.MustCompile(`\bLLD (\d+)\.\d+`)

// lldMajor runs `tool --version` and returns lld's major version, or "" when
// the tool is not lld (a clang driver, GNU ld, a script that fails). The
// answer of a tool that ran is kept in Options.ToolFacts, which may give
// it the next time without running the tool. The errors are the
// cancellation of ctx and a tool that cannot be run at all (not found, not
// executable): the link command could not run either, and taking it for a
// driver would only blame the wrong step.
func (p *plan) lldMajor(ctx context.Context, tool string) (string, error) {
	facts, name := p.opts.ToolFacts, tool
	if strings.Contains(tool, "/") && !filepath.IsAbs(tool) && p.opts.Dir != "" {
		name = filepath.Join(p.opts.Dir, tool) // as p.run runs it
	}
	if facts != nil {
		if major, ok := facts.Get(name, "--version"); ok {
			return major, nil
		}
	}
	var stdout bytes.Buffer
	out, err := p.run(ctx, []string{tool, "--version"}, &stdout)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return "", err
	}
	if err != nil {
		return "", nil
	}
	major := ""
	if m := lldVersion.FindStringSubmatch(stdout.String() + out); m != nil {
		major = m[1]
	}
	if facts != nil {
		facts.Put(name, "--version", major)
	}
	return major, nil
}

// findLinker makes sure the link runs lld and learns the linker's own
// command line: the command itself when it runs lld, else the link job the
// clang driver would run (its -### output), whose options (-pie added by
// the driver's default, -shared, -r) decide the relocation model.
func (p *plan) findLinker(ctx context.Context) error {
	if p.line.direct {
		p.ld = p.line
		return nil
	}
	cmd := append(append([]string{}, p.opts.Command...), "-###")
	var stdout bytes.Buffer
	out, err := p.run(ctx, cmd, &stdout)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		// The driver checks its inputs: a missing one is reported here.
		var msgs []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "error:") {
				msgs = append(msgs, strings.TrimSpace(l))
			}
		}
		return fmt.Errorf("asking the driver which linker it runs (%s -###): %v\n  %s", p.line.compiler, err, strings.Join(msgs, "\n  "))
	}
	var job []string
	for _, l := range strings.Split(out+"\n"+stdout.String(), "\n") {
		if strings.HasPrefix(l, ` "`) {
			job = splitDriverJob(l) // the link is the last job
		}
	}
	if len(job) == 0 {
		return fmt.Errorf("%s -### shows no link job; is %s a clang driver?", p.line.compiler, p.line.compiler)
	}
	if p.lldMajorVersion, err = p.lldMajor(ctx, job[0]); err != nil {
		return err
	}
	if p.lldMajorVersion == "" {
		return fmt.Errorf("the link runs the linker %s, which is not lld (its --version does not say LLD); "+
			"thindist link needs lld for the thin link (--thinlto-index-only): add -fuse-ld=lld or --ld-path=<your ld.lld>", job[0])
	}
	p.ld, err = parseLinkLine(job, p.opts.Dir, true)
	return err
}

// splitDriverJob splits one job line of `clang -###`: arguments in double
// quotes, with \ escaping ", \ and $.
func splitDriverJob(line string) []string {
	var args []string
	for i := 0; i < len(line); i++ {
		if line[i] != '"' {
			continue
		}
		var b strings.Builder
		for i++; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
			}
			b.WriteByte(line[i])
		}
		args = append(args, b.String())
	}
	return args
}

// relocModel is how lld's in-process LTO sets the relocation model
// (lld/ELF/LTO.cpp, createConfig): left to each module for -r, PIC for
// -shared and -pie links, static otherwise.
type relocModel int

const (
	relocOfModule relocModel = iota
	relocPIC
	relocStatic
)

func (l *linkLine) relocModel() relocModel {
	switch {
	case l.relocatable:
		return relocOfModule
	case l.shared || l.pie:
		return relocPIC
	}
	return relocStatic
}

// moduleFlags returns the backend options that compile module m as lld's
// in-process LTO would: with the module's own target triple (clang would
// otherwise override it with its default one) and the link's relocation
// model, or for -r the module's: PIC if it has a "PIC Level" flag, else
// the target's default, which is static on ELF targets (LTOBackend's
// createTargetMachine).
func (p *plan) moduleFlags(m *Module) (moduleFlags, error) {
	data, err := os.ReadFile(p.abs(m.Key))
	if err != nil {
		return moduleFlags{}, err
	}
	// Only a -r link takes the relocation model from the module.
	r := p.ld.relocModel()
	var info bitcode.ModuleInfo
	what := "triple"
	if r == relocOfModule {
		what = "triple and PIC level"
		info, err = bitcode.ReadModuleInfo(data)
	} else {
		info.Triple, err = bitcode.ReadTriple(data)
	}
	if err != nil {
		return moduleFlags{}, fmt.Errorf("reading the module's %s: %w", what, err)
	}
	var f moduleFlags
	if info.Triple != "" {
		f.target = "--target=" + info.Triple
	}
	switch {
	case r == relocPIC, r == relocOfModule && info.PIC:
		f.reloc = "-fpic"
	default:
		f.reloc = "-fno-pic"
	}
	return f, nil
}

// moduleFlags are a module's own backend options: target ("--target=T",
// or "" when the module names none) and reloc ("-fpic" or "-fno-pic").
type moduleFlags struct{ target, reloc string }
