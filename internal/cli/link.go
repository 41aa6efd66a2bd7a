package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/action"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/thinlink"
	"github.com/thindist/thindist/internal/tools"
)

// linkFlags are the options of `thindist link` besides the common ones.
type linkFlags struct {
	compdb      string
	asCompiled  bool
	keepNative  string
	keepWorkDir bool
	workDir     string
	compiler    string
	verbose     bool
	separate    bool
	below       string
}

// inProcessBelow is --in-process-below's default: see docs/link.md
// ("Small links") for how it was chosen.
const inProcessBelow = "256K"

func newLinkFlags(cfg *config.Config, lf *linkFlags) *config.FlagSet {
	fs := config.NewFlagSet("thindist link")
	fs.String(&lf.compdb, "compdb", "Link", "FILE", "",
		"give each module's backend the optimisation and code-generation options of its own\n"+
			"compile command in this compilation database (compile_commands.json), frontend-only\n"+
			"options removed; modules without an entry use the link's options")
	fs.Bool(&lf.asCompiled, "sections-as-compiled", "Link", false,
		"give each backend its module's section options (from --compdb; without a database, none),\n"+
			"not the -ffunction-sections -fdata-sections in-process ThinLTO forces on all: far fewer\n"+
			"input sections for a large final link (a kernel's vmlinux), less for --gc-sections to remove")
	fs.String(&lf.keepNative, "keep-native-objects", "Link", "DIR", "",
		"keep each module's native object in DIR: obj/x.o as DIR/obj/x.o, member m.o of lib/libx.a\n"+
			"as DIR/lib/libx.a/m.o (absolute paths lose their leading /, \"..\" becomes \"__\")")
	fs.Bool(&lf.keepWorkDir, "keep-work-dir", "Link", false,
		"keep the work directory (shards, objects, response files; implies --separate-thin-link)")
	fs.String(&lf.workDir, "work-dir", "Link", "DIR", "",
		"the private work directory (default OUTPUT.thindist.d), replaced only if thindist made it")
	fs.String(&lf.compiler, "compiler", "Link", "CLANG", "",
		"the clang that runs the backends, of the LLVM that wrote the index (default: the link's\n"+
			"clang driver, or the clang beside a command's lld, else clang-<lld's major version> in PATH)")
	fs.Bool(&lf.separate, "separate-thin-link", "Link", false,
		"run a thin link and a final link (two lld processes) also with lld 21 and later")
	fs.String(&lf.below, "in-process-below", "Link", "SIZE", inProcessBelow,
		"run a link with less bitcode than SIZE (objects and archive members) as given: lld's\n"+
			"in-process ThinLTO makes the same objects for less than distributing costs; 0: never.\n"+
			"Not with --compdb, --sections-as-compiled, --keep-native-objects or --keep-work-dir")
	fs.Bool(&lf.verbose, "verbose", "Link", false, "print the thin and final link commands")
	fs.Alias("v", "verbose")
	cfg.Register(fs)
	fs.InOrder() // the link command follows, with flags of its own
	return fs
}

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
bitcode input (ld.lld --version, native objects), or with less than
--in-process-below of it, runs as given, so one LD= serves a whole build
(Kbuild: LD=<script running thindist link -- ld.lld "$@">).
`

func link(ctx context.Context, args []string, env pipeline.Env, start time.Time) int {
	sess := pipeline.NewSession("link", os.Args, env, start)
	env = sess.Env
	var cfg config.Config
	var lf linkFlags
	fs := newLinkFlags(&cfg, &lf)
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
	below, err := config.ParseSize(lf.below)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist link: --in-process-below: %v\n", err)
		return 2
	}
	sess.ReadAhead(&cfg) // while the thin link runs
	// The summary covers the whole command: the thin link, the backends
	// and the final link.
	opts := thinlink.Options{
		Command:            command,
		Compiler:           lf.compiler,
		WorkDir:            lf.workDir,
		KeepWorkDir:        lf.keepWorkDir,
		KeepNativeObjects:  lf.keepNative,
		SectionsAsCompiled: lf.asCompiled,
		SeparateThinLink:   lf.separate,
		Stdout:             os.Stdout,
		Stderr:             env.Stderr,
		Verbose:            lf.verbose,
		Run: func(ctx context.Context, actions []*action.Action) error {
			return sess.Run(ctx, &cfg, actions)
		},
		Phase:          sess.Timeline().Begin,
		Output:         sess.SetOutput,
		InProcessBelow: below,
	}
	// A link left to the linker says so (unless it holds no bitcode) and,
	// as thindist's own main runs it, becomes the linker: make waits on
	// lld itself, and nothing of thindist's runs after the decision.
	announce := func(h thinlink.Handover) {
		if h.InProcess() && !cfg.Quiet {
			modules := "modules"
			if h.Modules == 1 {
				modules = "module"
			}
			fmt.Fprintf(env.Stderr, "thindist: %s: left to lld's in-process ThinLTO (%d bitcode %s, %s: under --in-process-below=%s)\n",
				h.Output, h.Modules, modules, thinlink.Size(h.Bitcode), thinlink.Size(below))
		}
	}
	if env.Exec != nil {
		opts.Exec = func(h thinlink.Handover) error {
			announce(h)
			return env.Exec(h.Dir, h.Argv)
		}
	}
	if !cfg.NoCache {
		dir := cfg.CacheRoot(env.Getenv)
		opts.ToolFacts = tools.NewFacts(tools.NewIDs(filepath.Join(dir, "compilers")), filepath.Join(dir, "tools"))
	}
	if lf.compdb != "" {
		db, err := thinlink.LoadCompDB(lf.compdb)
		if err != nil {
			fmt.Fprintf(env.Stderr, "thindist link: reading the compilation database: %v\n", err)
			return 2
		}
		opts.CompDB = db
	}
	res, err := thinlink.Link(ctx, opts)
	if res != nil && res.Handover != nil && opts.Exec == nil {
		announce(*res.Handover)
	}
	if res != nil && res.Handover != nil {
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
	var lf linkFlags
	fs := newLinkFlags(&cfg, &lf)
	helpOwnFlags(w, linkIntro, fs)
	io.WriteString(w, `
Exit status: 0 when the program was linked; 1 when a step failed (the step, the
linker's or compiler's own messages and the command are printed); 2 for a usage
error; 130 when interrupted (SIGINT, SIGTERM or SIGHUP).
`)
}
