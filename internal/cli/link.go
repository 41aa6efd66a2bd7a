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
	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/thinlink"
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
}

func newLinkFlags(cfg *config.Config, lf *linkFlags) *config.FlagSet {
	fs := config.NewFlagSet("thindist link")
	fs.String(&lf.compdb, "compdb", "Link", "FILE", "",
		"give each module's backend the optimisation and code-generation options of its own\n"+
			"compile command in this compilation database (compile_commands.json), frontend-only\n"+
			"options removed; modules without an entry use the link's options")
	fs.Bool(&lf.asCompiled, "sections-as-compiled", "Link", false,
		"give each backend the section options its module was compiled with (from --compdb; without\n"+
			"a database, none) instead of the -ffunction-sections -fdata-sections that in-process\n"+
			"ThinLTO forces on every module: far fewer input sections for a large final link (a\n"+
			"kernel's vmlinux), less for --gc-sections to remove")
	fs.String(&lf.keepNative, "keep-native-objects", "Link", "DIR", "",
		"keep each module's native object in DIR: a plain object obj/x.o as DIR/obj/x.o, a member\n"+
			"m.o of archive lib/libx.a as DIR/lib/libx.a/m.o (absolute paths lose their leading /,\n"+
			"\"..\" becomes \"__\")")
	fs.Bool(&lf.keepWorkDir, "keep-work-dir", "Link", false,
		"keep the work directory (index shards, native objects, the links' response files;\n"+
			"implies --separate-thin-link) instead of removing it at the end")
	fs.String(&lf.workDir, "work-dir", "Link", "DIR", "",
		"the private work directory (default: OUTPUT.thindist.d beside the link's -o); an\n"+
			"existing one is replaced only if thindist created it")
	fs.String(&lf.compiler, "compiler", "Link", "CLANG", "",
		"the clang that runs the backends (default: the link's clang driver, or for a command that\n"+
			"runs lld itself, the clang installed beside it, else clang-<lld's major version> in PATH);\n"+
			"it must be the LLVM that wrote the index")
	fs.Bool(&lf.separate, "separate-thin-link", "Link", false,
		"run a thin link and a final link (two lld processes) also with lld 21 and later")
	fs.Bool(&lf.verbose, "verbose", "Link", false, "print the thin and final link commands")
	fs.Alias("v", "verbose")
	cfg.Register(fs)
	fs.InOrder() // the link command follows, with flags of its own
	return fs
}

const linkIntro = `Usage:
  thindist link [flags] -- clang++ -flto=thin -fuse-ld=lld OBJECTS... -o app
  thindist link [flags] -- ld.lld -r -o vmlinux.o --whole-archive vmlinux.a

Links a ThinLTO program with every backend run by thindist, with any lld: lld
21 and later in one process, with thindist as their DTLTO distributor; older
ones by a thin link, the backends, and a final link of the native objects
placed as lld's in-process LTO places them. Archives keep their semantics;
objects that are not bitcode (assembly, -fno-lto, prebuilt) pass untouched.

The command may run lld itself (ld.lld, ld.lld-22, a wrapper script: its
--version must say LLD) or a clang driver whose linker is lld. A link none of
whose inputs holds bitcode (ld.lld --version, a link of native objects) runs
unchanged, so one LD= serves a whole build (Kbuild: LD=<script running
thindist link -- ld.lld "$@">).
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
		Phase:  sess.Timeline().Begin,
		Output: sess.SetOutput,
	}
	if !cfg.NoCache {
		dir := pipeline.CacheDir(&cfg, env)
		opts.ToolFacts = cache.NewToolFacts(cache.NewCompilerIDs(filepath.Join(dir, "compilers")), filepath.Join(dir, "tools"))
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
	if res != nil && res.Unchanged {
		// No input held bitcode and the command ran as given: nothing of
		// thindist's ran, and a record would only push out those of the
		// ThinLTO links (Kbuild runs LD for --version and for every
		// native link: the vDSO, the boot code), leaving `thindist
		// report` to show an empty run.
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
