package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/source/linkflags"
	"github.com/thindist/thindist/internal/source/thinlink"
)

const linkIntro = `Usage:
  thindist link [flags] -- clang++ -flto=thin -fuse-ld=lld OBJECTS... -o app
  thindist link [flags] -- ld.lld -r -o vmlinux.o --whole-archive vmlinux.a

Links a ThinLTO program with every backend run by thindist, with any lld: lld 21
and later in one process, with thindist as their DTLTO distributor; older ones
by a thin link, the backends, and a final link of the native objects placed as
lld's in-process LTO places them. Archives keep their semantics; objects that
are not bitcode (assembly, -fno-lto, prebuilt) pass untouched.

The command may run lld itself (ld.lld, ld.lld-22, a wrapper script: its
--version must say LLD) or a clang driver whose linker is lld. A link with no
bitcode input, or less than --in-process-below of it, runs as given: one LD=
serves a whole build. thindist-link takes the same arguments and starts faster
for those (Kbuild: LD=<script running thindist-link -- ld.lld "$@">).
`

func link(ctx context.Context, args []string, env pipeline.Env, start time.Time) int {
	sess := pipeline.NewSession("link", os.Args, env, start)
	env = sess.Env
	var cfg config.Config
	var lf linkflags.Flags
	fs := linkflags.NewFlagSet(&cfg, &lf)
	if code := parseFlags("thindist link", fs, &cfg, args, env, linkUsage); code >= 0 {
		return code
	}
	if code := checkCacheDir("thindist link", fs, &cfg, env); code >= 0 {
		return code
	}
	sess.QuietJobserver(&cfg)
	command := fs.Args()
	if len(command) == 0 {
		fmt.Fprintf(env.Stderr, "thindist link: no link command given\nRun 'thindist link --help' for usage.\n")
		return 2
	}
	opts, err := lf.Options(&cfg, command, env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist link: %v\n", err)
		return 2
	}
	sess.ReadAhead(&cfg) // while the thin link runs
	// The summary covers the whole command: the thin link, the backends
	// and the final link.
	opts.Stdout = os.Stdout
	opts.Stderr = env.Stderr
	opts.Run = func(ctx context.Context, actions []*action.Action) error {
		return sess.Run(ctx, &cfg, actions)
	}
	opts.Phase = sess.Timeline().Begin
	opts.Output = sess.SetOutput
	// A link left to the linker says so (unless it holds no bitcode) and,
	// as thindist's own main runs it, becomes the linker: make waits on
	// lld itself, and nothing of thindist's runs after the decision.
	if env.Exec != nil {
		opts.Exec = linkflags.Exec(env.Stderr, cfg.Quiet, opts.InProcessBelow, env.Exec)
	}
	if lf.CompDB != "" {
		db, err := thinlink.LoadCompDB(lf.CompDB)
		if err != nil {
			fmt.Fprintf(env.Stderr, "thindist link: reading the compilation database: %v\n", err)
			return 2
		}
		opts.CompDB = db
	}
	res, err := thinlink.Link(ctx, opts)
	if res != nil && res.Handover != nil {
		if opts.Exec == nil { // else Exec announced it, and failed
			linkflags.Announce(env.Stderr, cfg.Quiet, *res.Handover, opts.InProcessBelow)
		}
		// The command ran as given (no input held bitcode, or too little
		// to distribute): nothing of thindist's ran, and a record would
		// only push out those of the distributed links (Kbuild runs LD for
		// --version, for every native link, for every module's), leaving
		// `thindist report` to show an empty run.
		cfg.NoRecord = true
	}
	code := 0
	var te *thinlink.Error
	if errors.As(err, &te) {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(env.Stderr, "thindist link: interrupted during %s; stopped it\n", te.Step)
			code = 130
		} else {
			fmt.Fprintf(env.Stderr, "thindist link: error in %v\n", te)
			code = 1
		}
	} else {
		code = exitCode(err, env)
	}
	sess.Finish(&cfg, err)
	return code
}

func linkUsage(w io.Writer) {
	var cfg config.Config
	var lf linkflags.Flags
	fs := linkflags.NewFlagSet(&cfg, &lf)
	helpOwnFlags(w, linkIntro, fs)
	io.WriteString(w, `
Exit status: 0 when the program was linked; 1 when a step failed (the step, the
linker's or compiler's own messages and the command are printed); 2 for a usage
error; 130 when interrupted (SIGINT, SIGTERM or SIGHUP).
`)
}
