// Package thinlink implements `thindist link`: distributed ThinLTO for any
// build and any LLVM with lld, through the separate thin-link flow.
//
// Given the link command of a ThinLTO program it
//
//  1. finds the linker inputs that hold bitcode, by content: plain objects
//     and archives (given by path, through -l in a -L directory, inside -Wl,
//     and -Xlinker, or in @response files), and gives every bitcode module
//     a file of its own in a private work directory, named as lld names the
//     module in-process (names.go): a symbolic link to the object or the
//     thin archive's member, or a regular archive's member written out;
//  2. runs the thin link: the same command with every such archive replaced
//     by its members between --start-lib and --end-lib (so the linker keeps
//     archive semantics; members under --whole-archive are plain objects),
//     every module under its file's name, plus --thinlto-index-only and
//     --thinlto-prefix-replace into the work directory. lld records those
//     names verbatim in the index;
//  3. turns each module lld listed in the index file (those the link really
//     uses, in link order) into an action.Action: `<clang> -c <lld's DTLTO
//     flags> <more flags> -x ir MODULE -fthinlto-index=SHARD -o NATIVE`
//     (the command, and so the cache key, of lld's DTLTO for the same
//     module), with its imports as inputs, and runs them with Options.Run (the
//     pipeline's Session.Run in `thindist link`: the cache, remote execution
//     and reporting apply as for lld's DTLTO);
//  4. runs the final link: the same command again with each bitcode object
//     replaced by its native object, everything the thin link extracted from
//     archives and --start-lib groups (lld's --why-extract) linked as plain
//     objects, what it did not extract left lazy (native) or dropped
//     (bitcode), and everything else (assembly, -fno-lto and prebuilt
//     objects, shared libraries, linker scripts) untouched: the objects an
//     in-process ThinLTO link would link; and writes the linker's
//     --dependency-file again with the command's inputs in place of the
//     work directory's files (depfile.go).
//
// A link none of whose inputs holds bitcode, or whose bitcode totals less
// than Options.InProcessBelow, goes no further than reading its inputs: it
// is left to the linker, to run as given (handover.go): lld's in-process
// ThinLTO, whose objects thindist's defaults reproduce, costs less than
// distributing a link that small. Decide takes that decision alone, and
// HandOver runs its answer, for a caller that must not start more than
// that (the thindist-link front).
package thinlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// Options configures Link.
type Options struct {
	// Command is the link command: the clang driver, or ld.lld itself,
	// first.
	Command []string
	// Compiler runs the backends; "" means the link's clang driver, or for
	// ld.lld run directly the clang installed beside it.
	Compiler string
	// Dir is the absolute directory the link runs in; "" is the current one.
	Dir string
	// WorkDir is the private work directory; "" means "<output>.thindist.d"
	// beside the link's output. It is removed at the end unless KeepWorkDir.
	WorkDir     string
	KeepWorkDir bool
	// KeepNativeObjects, if set, is a directory where each module's native
	// object is kept under a predictable name (see KeepName).
	KeepNativeObjects string
	// CompDB, if set, gives each module the optimisation and code-generation
	// options of its own compile command.
	CompDB *CompDB
	// SectionsAsCompiled leaves out the -ffunction-sections -fdata-sections
	// that in-process ThinLTO forces on every module: each backend gets the
	// section options of its module's compile command (CompDB's), or none.
	SectionsAsCompiled bool
	// Stdout and Stderr receive the final link's output and thindist's
	// messages.
	Stdout, Stderr io.Writer
	// Run executes the backend actions: in `thindist link`, the pipeline's
	// Session.Run with the run's Config. It reports on its own; Link adds nothing to its error.
	Run func(ctx context.Context, actions []*action.Action) error
	// Verbose prints the thin and final link commands.
	Verbose bool
	// Phase, if set, is told when the thin and final links begin; the
	// function it returns, when they end (for the summary's account of
	// where the time went).
	Phase func(name string) (end func())
	// Output, if set, hears the link's output (its -o, as the command
	// spells it) once the command is read, before anything runs: the
	// backends' trace and the run's record name it even if a step fails.
	Output func(path string)
	// SeparateThinLink runs the thin link and the final link as two lld
	// processes (--thinlto-index-only) with any lld. Otherwise lld 21 and
	// later link in one process, with thindist as its DTLTO distributor
	// (see linkOnce); KeepWorkDir implies it, since only this flow leaves
	// the shards and objects in the work directory.
	SeparateThinLink bool
	// ToolFacts, if set, remembers what the linker said of itself
	// (--version) across links; nil asks it on every link.
	ToolFacts ToolFacts
	// InProcessBelow leaves a link whose bitcode totals fewer bytes to
	// lld's in-process ThinLTO (Handover); 0 distributes every link that
	// holds bitcode. A link left to lld makes no work directory and no
	// native objects of thindist's, and its backends get lld's options, not
	// CompDB's or SectionsAsCompiled's: a caller that sets those wants 0
	// here (`thindist link` does: linkflags.Flags.InProcessBelow).
	InProcessBelow int64
	// Exec, if set, runs a link that thindist leaves to the linker by
	// replacing this process with it (syscall.Exec), and returns only if
	// it cannot. Unset, Link runs it as a child and passes its messages on.
	Exec func(Handover) error
}

// ToolFacts remembers what a tool (a command name, as run) answered to a
// question, as long as the tool stays the same (tools.Facts).
type ToolFacts interface {
	Get(tool, question string) (answer string, ok bool)
	Put(tool, question, answer string)
}

func (o *Options) phase(name string) (end func()) {
	if o.Phase == nil {
		return func() {}
	}
	return o.Phase(name)
}

// Error is a failure of one of Link's steps, with what thindist was doing.
type Error struct {
	Step   string // e.g. "the thin link"
	Err    error
	Output string // the tool's own messages
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", e.Step, e.Err)
	if s := strings.TrimSpace(e.Output); s != "" {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(s, "\n", "\n  "))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Module is one bitcode module of the link.
type Module struct {
	// Key is the path given to lld for it, which lld records in the index
	// and which the backend must be given verbatim: a file under the work
	// directory named as lld names the module in-process (names.go).
	Key string
	// Display names it in messages: the path, or "lib.a(m.o)" for a member.
	Display string
	// KeepName is its name under --keep-native-objects.
	KeepName string
	// Object is the object file's absolute path when it is a file of the
	// build (a plain object, a thin archive's member): what a compilation
	// database's "output" names. Empty for a regular archive's member.
	Object string
	Member string // the member name, for a member of a regular archive
	// input is the command's input it comes from: the object's path, or
	// the archive's.
	input string
	// Native is the native object, once the thin link has listed it.
	Native string
	linked bool
}

// Result describes a finished link.
type Result struct {
	// Handover is set when thindist left the link to the linker, which ran
	// it as it was given, and says why; nil for a distributed link.
	Handover *Handover
	Output   string    // the link's -o, as the command spells it
	Modules  []*Module // in link order, only those the link uses
	Actions  []*action.Action
	WorkDir  string
	ThinLink []string // the thin link command (with its response file)
	Final    []string // the final link command
}

type plan struct {
	opts Options
	line *linkLine
	// ld is the linker's own command line: line itself when the command
	// runs lld, else the link job of the driver.
	ld              *linkLine
	lldMajorVersion string         // of the lld the command runs
	bitcode         []bitcodeInput // the inputs holding bitcode, in command-line order
	work            string         // work directory as used in commands (relative to Dir if possible)
	modules         map[string]*Module
	order           []*Module           // every module, in command-line order
	archive         map[int][]entry     // item index -> replacement
	single          map[int]*Module     // item index -> plain bitcode object
	ids             map[string]string   // keep names used
	modDir          string              // where the modules are named (names.go)
	placed          map[string]string   // module file (clean, absolute) -> what it holds
	standsFor       map[string]string   // work directory file -> the input it stands for (depfile.go)
	made            map[string]bool     // directories made under modDir
	idx             string              // where lld writes the index shards
	native          string              // the prefix of lld's native object names in index.txt
	missing         []string            // inputs that cannot be opened (left to the linker)
	passed          map[int]string      // item index -> archive without bitcode
	members         map[string][]string // archive as lld names it -> members it extracted
	forced          map[string]bool     // archives (as lld names them) whose members are forced
	// extracted holds what the thin link extracted from archives and
	// --start-lib groups, as lld names it ("dir/x.o", "lib.a(m.o)").
	extracted map[string]bool
	// extractOrder numbers them in the order lld extracted them.
	extractOrder map[string]int
}

// Link runs the whole flow and returns what it did.
func Link(ctx context.Context, opts Options) (res *Result, err error) {
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	// Until the thin link: asking the linker its version and the driver
	// its link job (processes), reading the inputs, unpacking archives.
	endRead := opts.phase("reading the link")
	defer func() { endRead() }()
	p, err := read(ctx, opts)
	if err != nil {
		return nil, err
	}
	if h := p.leftToLinker(); h != nil {
		return &Result{Handover: h, Output: p.line.output}, p.handOver(ctx, *h)
	}
	if err := p.findLinker(ctx); err != nil {
		return nil, &Error{Step: "finding the linker", Err: err}
	}

	work := opts.WorkDir
	if work == "" {
		work = p.line.output + ".thindist.d"
	}
	if err := p.makeWorkDir(work); err != nil {
		return nil, &Error{Step: "creating the work directory", Err: err}
	}
	defer func() {
		if !opts.KeepWorkDir {
			os.RemoveAll(p.abs(p.work))
		} else {
			fmt.Fprintf(opts.Stderr, "thindist: kept the work directory %s\n", p.work)
		}
	}()
	if err := p.addModules(); err != nil {
		return nil, &Error{Step: "looking for bitcode among the link's inputs", Err: err}
	}
	res = &Result{WorkDir: p.work, Output: p.line.output}
	endRead()
	endRead = func() {}

	if p.oneLLD() {
		if err := p.linkOnce(ctx, res); err != nil {
			return res, err
		}
		p.rewriteDepFile()
		return res, nil
	}
	endThin := opts.phase("thin link")
	linked, thin, err := p.thinLink(ctx)
	endThin()
	res.ThinLink = thin
	if err != nil {
		return res, err
	}
	res.Modules = linked
	err = p.backends(ctx, res, func() ([]backend, error) { return p.separateBackends(linked) })
	if err != nil {
		return res, err
	}
	endFinal := opts.phase("final link")
	res.Final, err = p.finalLink(ctx, linked)
	endFinal()
	if err == nil {
		p.rewriteDepFile()
	}
	return res, err
}

// Decide reads the link command and finds its inputs, as Link does first,
// and returns the Handover of a link that thindist leaves to the linker,
// or nil for one it distributes. It runs nothing but the linker's
// --version (unless Options.ToolFacts knows it), writes none of the link's
// files, and needs no Run. HandOver runs what it returns.
func Decide(ctx context.Context, opts Options) (*Handover, error) {
	opts, err := opts.defaults()
	if err != nil {
		return nil, err
	}
	p, err := read(ctx, opts)
	if err != nil {
		return nil, err
	}
	return p.leftToLinker(), nil
}

// HandOver runs a link that Decide left to the linker, as Link would:
// through Options.Exec if set, which replaces this process, else as a
// child whose messages it passes on.
func HandOver(ctx context.Context, opts Options, h Handover) error {
	opts, err := opts.defaults()
	if err != nil {
		return err
	}
	p := &plan{opts: opts}
	return p.handOver(ctx, h)
}

// read is the first step of Link and Decide: it reads the command line
// (what the command runs, its response files, its options) and finds the
// inputs that hold bitcode.
func read(ctx context.Context, opts Options) (*plan, error) {
	args, err := expandResponseFiles(opts.Command, opts.Dir)
	if err != nil {
		return nil, &Error{Step: "reading the link command's response files", Err: err}
	}
	p := &plan{opts: opts, modules: map[string]*Module{}, archive: map[int][]entry{},
		single: map[int]*Module{}, ids: map[string]string{}, passed: map[int]string{}, standsFor: map[string]string{}}
	// The command runs lld itself if it says so; anything else is taken for
	// a compiler driver.
	if p.lldMajorVersion, err = p.lldMajor(ctx, args[0]); err != nil {
		return nil, &Error{Step: "asking " + args[0] + " what it is (--version)", Err: err}
	}
	if p.line, err = parseLinkLine(args, opts.Dir, p.lldMajorVersion != ""); err != nil {
		return nil, &Error{Step: "reading the link command", Err: err}
	}
	if opts.Output != nil {
		opts.Output(p.line.output)
	}
	p.findInputs()
	return p, nil
}

// withDefaults returns o with its unset Dir (the current directory),
// Stdout and Stderr filled in, or an error when Run or Command is missing.
func (o Options) withDefaults() (Options, error) {
	if o.Run == nil {
		return o, errors.New("thinlink: Options.Run is not set")
	}
	return o.defaults()
}

// defaults is withDefaults for what does not run backends (Decide,
// HandOver).
func (o Options) defaults() (Options, error) {
	if o.Dir == "" {
		var err error
		if o.Dir, err = os.Getwd(); err != nil {
			return o, err
		}
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if len(o.Command) == 0 {
		return o, &Error{Step: "reading the link command", Err: errors.New("no link command given after --")}
	}
	return o, nil
}

// backends is the step between the thin link and the final link: it plans
// the backend compilations of the linked modules (what plan says of each,
// recorded in res.Actions), runs them with p.opts.Run and keeps their
// native objects when asked to.
func (p *plan) backends(ctx context.Context, res *Result, plan func() ([]backend, error)) error {
	opts := p.opts
	endPlan := opts.phase("planning the backends") // reading the shards and modules
	bs, err := plan()
	var actions []*action.Action
	if err == nil {
		actions, err = p.actions(ctx, bs)
	}
	endPlan()
	if err != nil {
		return &Error{Step: "preparing the backend compilations", Err: err}
	}
	res.Actions = actions
	if len(actions) > 0 {
		if err := opts.Run(ctx, actions); err != nil {
			var r rerunnable
			if !opts.KeepWorkDir && !errors.Is(err, context.Canceled) && !(errors.As(err, &r) && r.Rerunnable()) {
				fmt.Fprintf(opts.Stderr, "thindist link: the backend compilations failed; the work directory %s is removed "+
					"(run again with --keep-work-dir to keep its index shards and re-run a command by hand)\n", p.work)
			}
			return err
		}
	}
	if opts.KeepNativeObjects != "" {
		if err := p.keep(res.Modules); err != nil {
			return &Error{Step: "keeping the native objects in " + opts.KeepNativeObjects, Err: err}
		}
	}
	return nil
}

// rerunnable is an error that says itself how to run a failed backend
// again, on kept copies of its inputs (the pipeline's BackendError): then
// the work directory need not be kept for it.
type rerunnable interface{ Rerunnable() bool }

// abs resolves p against the link's directory.
func (p *plan) abs(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(p.opts.Dir, path)
}

// portable spells a module's path for lld, which records it in the index,
// and for the backend: an absolute path becomes relative to the link's
// directory when that names the same file, so that actions carry no
// machine-specific paths and can run in a remote input root. Relative paths
// are kept as given ("a/../b.o" included: the action layout handles them).
func (p *plan) portable(path string) string {
	if !filepath.IsAbs(path) {
		return path
	}
	r, err := filepath.Rel(p.opts.Dir, path)
	if err != nil {
		return path
	}
	a, err1 := os.Stat(path)
	b, err2 := os.Stat(filepath.Join(p.opts.Dir, r))
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return path
	}
	return r
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
