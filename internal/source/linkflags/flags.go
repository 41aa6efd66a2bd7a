// Package linkflags is the command line of `thindist link`: its flags, and
// what they decide before any of thindist's machinery starts, whether a
// link is left to lld (thinlink.Decide). thindist and the thindist-link
// front (front.go) both read a link's command line with it, so they read
// it the same way. It stays small: the front's start is what it saves.
// The link command after the flags (the clang driver's or lld's
// arguments) is thinlink's to parse (thinlink/linkline.go).
package linkflags

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/llvm/tools"
	"github.com/thindist/thindist/internal/source/thinlink"
)

// Flags are the options of `thindist link` besides the common ones.
type Flags struct {
	CompDB      string
	AsCompiled  bool
	KeepNative  string
	KeepWorkDir bool
	WorkDir     string
	Compiler    string
	Verbose     bool
	Separate    bool
	Below       string
}

// DefaultInProcessBelow is --in-process-below's default: see docs/link.md
// ("Small links") for how it was chosen.
const DefaultInProcessBelow = "256K"

// NewFlagSet defines the flags of `thindist link`, which fill cfg (the
// common ones) and f.
func NewFlagSet(cfg *config.Config, f *Flags) *config.FlagSet {
	fs := config.NewFlagSet("thindist link")
	Register(fs, f)
	cfg.Register(fs)
	fs.InOrder() // the link command follows, with flags of its own
	return fs
}

// Register defines the settings of `thindist link` besides the common ones
// in fs, filling f: for the link's own set, and for `thindist config`,
// which lists them.
func Register(fs *config.FlagSet, f *Flags) {
	fs.String(&f.CompDB, "compdb", "Link", "FILE", "",
		"give each module's backend the optimisation and code-generation options of its own\n"+
			"compile command in this compilation database (compile_commands.json), frontend-only\n"+
			"options removed; modules without an entry use the link's options")
	fs.Bool(&f.AsCompiled, "sections-as-compiled", "Link", false,
		"give each backend its module's section options (from --compdb; without a database, none),\n"+
			"not the -ffunction-sections -fdata-sections in-process ThinLTO forces on all: far fewer\n"+
			"input sections for a large final link (a kernel's vmlinux), less for --gc-sections to remove")
	fs.String(&f.KeepNative, "keep-native-objects", "Link", "DIR", "",
		"keep each module's native object in DIR: obj/x.o as DIR/obj/x.o, member m.o of lib/libx.a\n"+
			"as DIR/lib/libx.a/m.o (absolute paths lose their leading /, \"..\" becomes \"__\")")
	fs.Bool(&f.KeepWorkDir, "keep-work-dir", "Link", false,
		"keep the work directory (shards, objects, response files; implies --separate-thin-link)")
	fs.String(&f.WorkDir, "work-dir", "Link", "DIR", "",
		"the private work directory (default OUTPUT.thindist.d), replaced only if thindist made it")
	fs.String(&f.Compiler, "compiler", "Link", "CLANG", "",
		"the clang that runs the backends, of the LLVM that wrote the index (default: the link's\n"+
			"clang driver, or the clang beside a command's lld, else clang-<lld's major version> in PATH)")
	fs.Bool(&f.Separate, "separate-thin-link", "Link", false,
		"run a thin link and a final link (two lld processes) also with lld 21 and later")
	fs.Size(&f.Below, "in-process-below", "Link", DefaultInProcessBelow,
		"run a link with less bitcode than SIZE (objects and archive members) as given: lld's\n"+
			"in-process ThinLTO makes the same objects for less than distributing costs; 0: never.\n"+
			"Not with --compdb, --sections-as-compiled, --keep-native-objects or --keep-work-dir")
	fs.Bool(&f.Verbose, "verbose", "Link", false, "print the thin and final link commands")
	fs.Alias("v", "verbose")
}

// InProcessBelow is the size of bitcode under which a link is left to
// lld's in-process ThinLTO (thinlink.Options.InProcessBelow): 0 when an
// option asks for what only distributing gives, other objects than
// in-process (--compdb, --sections-as-compiled) or thindist's own files
// (--keep-native-objects, --keep-work-dir); else --in-process-below.
func (f *Flags) InProcessBelow() (int64, error) {
	below, err := config.ParseSize(f.Below)
	if err != nil {
		return 0, fmt.Errorf("--in-process-below: %v", err)
	}
	if f.CompDB != "" || f.AsCompiled || f.KeepNative != "" || f.KeepWorkDir {
		return 0, nil
	}
	return below, nil
}

// Options are the thinlink.Options the command line gives: all but what
// runs the link (Run, Phase, Output, Exec) and CompDB, which the caller
// loads.
func (f *Flags) Options(cfg *config.Config, command []string, getenv func(string) string) (thinlink.Options, error) {
	below, err := f.InProcessBelow()
	if err != nil {
		return thinlink.Options{}, err
	}
	opts := thinlink.Options{
		Command:            command,
		Compiler:           f.Compiler,
		WorkDir:            f.WorkDir,
		KeepWorkDir:        f.KeepWorkDir,
		KeepNativeObjects:  f.KeepNative,
		SectionsAsCompiled: f.AsCompiled,
		SeparateThinLink:   f.Separate,
		Verbose:            f.Verbose,
		InProcessBelow:     below,
	}
	if !cfg.NoCache {
		dir := cfg.CacheRoot(getenv)
		opts.ToolFacts = tools.NewFacts(tools.NewIDs(filepath.Join(dir, "compilers")), filepath.Join(dir, "tools"))
	}
	return opts, nil
}

// Announce says on w, unless quiet, that a link holding bitcode was left
// to lld's in-process ThinLTO, and why; a link without bitcode goes
// without a word.
func Announce(w io.Writer, quiet bool, h thinlink.Handover, below int64) {
	if !h.InProcess() || quiet {
		return
	}
	modules := "modules"
	if h.Modules == 1 {
		modules = "module"
	}
	fmt.Fprintf(w, "thindist: %s: left to lld's in-process ThinLTO (%d bitcode %s, %s: under --in-process-below=%s)\n",
		h.Output, h.Modules, modules, thinlink.Size(h.Bitcode), thinlink.Size(below))
}

// Exec is the thinlink.Options.Exec of a process that becomes the link it
// leaves to lld: it announces the link on w (unless quiet) and replaces
// the process with it (Replace).
func Exec(w io.Writer, quiet bool, below int64, replace func(dir string, argv []string) error) func(thinlink.Handover) error {
	return func(h thinlink.Handover) error {
		Announce(w, quiet, h, below)
		return replace(h.Dir, h.Argv)
	}
}
