// Package cli is thindist's command line: the DTLTO distributor entry point
// (`thindist [flags] job.json`, as lld runs it) and the subcommands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/jobfile"
	"github.com/thindist/thindist/internal/pipeline"
)

// Version is set at build time with -ldflags "-X .../cli.Version=...".
var Version = "dev"

// Main runs thindist with args (without the program name) and returns the
// exit status.
func Main(ctx context.Context, args []string) int {
	env := pipeline.StdEnv()
	if len(args) > 0 {
		switch args[0] {
		case "help":
			usage(os.Stdout)
			return 0
		case "cache":
			return cacheCmd(args[1:], env, os.Stdout)
		case "doctor":
			return doctorCmd(ctx, args[1:], env, os.Stdout)
		case "version":
			fmt.Println("thindist", Version)
			return 0
		case "link":
			return link(ctx, args[1:], env)
		}
	}
	return distribute(ctx, args, env)
}

const intro = `thindist runs LLVM ThinLTO backend compilations: locally in parallel, and never
twice for the same inputs.

Usage:
  thindist [flags] JOBFILE     run the jobs of an lld DTLTO job file (lld calls this)
  thindist link [flags] -- LINK-COMMAND
                               distributed ThinLTO with any lld: see 'thindist link --help'
  thindist cache stats|clear   show or empty the local cache
  thindist doctor [--compiler CLANG] [--remote URL [--remote-* ...]]
                               check a remote execution service: connection,
                               capabilities, CAS, the workers' compiler version
  thindist help                this text
  thindist version             print the version

As lld's DTLTO distributor (LLVM 21 and later):
  clang -flto=thin -fuse-ld=lld -fthinlto-distributor=$(command -v thindist) \
        -Xthinlto-distributor=--jobs=8 a.o b.o -o app

Every flag can also be given as an environment variable (shown with each flag);
a flag on the command line wins over its variable.
`

func newFlags(cfg *config.Config) *config.FlagSet {
	fs := config.NewFlagSet("thindist")
	cfg.Register(fs)
	return fs
}

func usage(w io.Writer) {
	var cfg config.Config
	fs := newFlags(&cfg)
	io.WriteString(w, intro)
	fs.PrintDefaults(w)
	io.WriteString(w, `
Exit status: 0 when every backend compiled and produced an object file; 1 when
any failed (the failing module, its exit status, the command and its stderr are
printed); 2 for a usage or job-file error, in which case nothing ran.
`)
}

// parseFlags reads args into fs and checks cfg, for the command name
// ("thindist", "thindist link", ...). It returns the exit status to stop
// with, or -1 to go on; --help prints help to stdout.
func parseFlags(name string, fs *config.FlagSet, cfg *config.Config, args []string, env pipeline.Env, help func(io.Writer)) int {
	if err := fs.Parse(args, env.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(os.Stdout)
			return 0
		}
		fmt.Fprintf(env.Stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return 2
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return 2
	}
	return -1
}

func distribute(ctx context.Context, args []string, env pipeline.Env) int {
	var cfg config.Config
	fs := newFlags(&cfg)
	if code := parseFlags("thindist", fs, &cfg, args, env, usage); code >= 0 {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintf(env.Stderr, "thindist: no job file given\nRun 'thindist --help' for usage.\n")
		return 2
	}
	if len(rest) > 1 {
		fmt.Fprintf(env.Stderr, "thindist: unexpected arguments before the job file: %s\n"+
			"(thindist flags go before the job file; from clang pass them with -Xthinlto-distributor=--flag=value)\n",
			strings.Join(rest[:len(rest)-1], " "))
		return 2
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist: %v\n", err)
		return 2
	}
	jf, err := jobfile.Load(rest[0], dir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist: error: %v\n", err)
		return 2
	}
	return exitCode(pipeline.Run(ctx, &cfg, env, jf.Actions), env)
}

func exitCode(err error, env pipeline.Env) int {
	if err == nil {
		return 0
	}
	var rep *pipeline.Reported
	if !errors.As(err, &rep) {
		fmt.Fprintf(env.Stderr, "thindist: error: %v\n", err)
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}
