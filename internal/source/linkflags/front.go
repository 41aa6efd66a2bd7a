package linkflags

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/source/thinlink"
)

// FrontEnv is what Front needs of its process.
type FrontEnv struct {
	Getenv func(string) string
	Stderr io.Writer
	// Replace replaces the process with a command (Replace); it returns
	// only if it cannot.
	Replace func(dir string, argv []string) error
	// Self is this program's executable, beside which Front looks first
	// for the thindist to pass the other links to (FindThindist).
	Self string
}

// Front is `thindist link ARGS` in a program that starts in a fraction of
// thindist's time, for the links thindist leaves to lld: a build of many
// small links (Kbuild's modules, a test suite's programs) runs thindist
// once a link, and a link of a few milliseconds feels its start. It reads
// the command line as thindist link does (NewFlagSet, Flags.Options,
// thinlink.Decide, with the same tool facts) and, for a link left to lld,
// announces it and becomes the linker as thindist would. Every other case
// becomes `thindist link ARGS`, which does the rest and says what is
// wrong: a link to distribute, --help, a flag or a setting it does not
// accept, a config file it warns about, a command it cannot read. (A
// link left to lld uses no cache but the tool facts, so an unusable
// --cache-dir is reported by the first link thindist distributes.) Front
// returns only when it cannot replace the process.
func Front(ctx context.Context, args []string, env FrontEnv) error {
	var cfg config.Config
	var f Flags
	fs := NewFlagSet(&cfg, &f)
	if fs.Parse(args, env.Getenv) == nil && len(fs.Warnings()) == 0 && cfg.Check() == nil && len(fs.Args()) > 0 {
		if opts, err := f.Options(&cfg, fs.Args(), env.Getenv); err == nil {
			if h, err := thinlink.Decide(ctx, opts); err == nil && h != nil {
				opts.Stderr = env.Stderr
				opts.Exec = Exec(env.Stderr, cfg.Quiet, opts.InProcessBelow, env.Replace)
				return thinlink.HandOver(ctx, opts, *h)
			}
		}
	}
	thindist := FindThindist(env.Self)
	if thindist == "" {
		return errors.New("cannot find thindist, beside thindist-link or in PATH, to run this link: install both (scripts/install.sh)")
	}
	return env.Replace(".", append([]string{thindist, "link"}, args...))
}

// FindThindist returns the thindist beside the executable self (as
// scripts/install.sh installs them), else the one in PATH, else "".
func FindThindist(self string) string {
	if self != "" {
		p := filepath.Join(filepath.Dir(self), "thindist")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	p, err := exec.LookPath("thindist")
	if err != nil {
		return ""
	}
	return p
}
