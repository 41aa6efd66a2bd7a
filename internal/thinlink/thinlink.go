// Package thinlink implements `thindist link`: distributed ThinLTO for any
// build and any LLVM with lld, through the separate thin-link flow.
//
// Given the link command of a ThinLTO program it
//
//  1. finds the linker inputs that hold bitcode, by content: plain objects
//     and archives (given by path, through -l in a -L directory, inside -Wl,
//     and -Xlinker, or in @response files). The bitcode-bearing members of a
//     regular archive are written out into a private work directory; those of
//     a thin archive are the files it names;
//  2. runs the thin link: the same command with every such archive replaced
//     by its members between --start-lib and --end-lib (so the linker keeps
//     archive semantics; members under --whole-archive are plain objects),
//     plus --thinlto-index-only and --thinlto-prefix-replace into the work
//     directory. Every module then has a path of its own, which lld records
//     verbatim in the index;
//  3. turns each module lld listed in the index file (those the link really
//     uses, in link order) into an action.Action: `<clang> <backend flags>
//     -c -x ir MODULE -fthinlto-index=SHARD -o NATIVE`, with its imports as
//     inputs, and runs them with pipeline.Run (so the cache, remote
//     execution and reporting apply as for lld's DTLTO);
//  4. runs the final link: the same command again with each bitcode object
//     replaced by its native object, everything the thin link extracted from
//     archives and --start-lib groups (lld's --why-extract) linked as plain
//     objects, what it did not extract left lazy (native) or dropped
//     (bitcode), and everything else (assembly, -fno-lto and prebuilt
//     objects, shared libraries, linker scripts) untouched: the objects an
//     in-process ThinLTO link would link.
package thinlink

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/bitcode"
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
	// Stdout and Stderr receive the final link's output and thindist's
	// messages.
	Stdout, Stderr io.Writer
	// Run executes the backend actions: pipeline.Run with the run's Config
	// and Env. It reports on its own; Link adds nothing to its error.
	Run func(ctx context.Context, actions []*action.Action) error
	// Verbose prints the thin and final link commands.
	Verbose bool
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
	// and which the backend must be given verbatim.
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
	// Native is the native object, once the thin link has listed it.
	Native string
	linked bool
}

// Result describes a finished link.
type Result struct {
	Modules  []*Module // in link order, only those the link uses
	Actions  []*action.Action
	WorkDir  string
	ThinLink []string // the thin link command (with its response file)
	Final    []string // the final link command
}

// entry is one file of a replaced archive: a module, or a file passed as is.
type entry struct {
	mod  *Module
	file string
}

type plan struct {
	opts    Options
	line    *linkLine
	work    string // work directory as used in commands (relative to Dir if possible)
	modules map[string]*Module
	order   []*Module           // every module, in command-line order
	archive map[int][]entry     // item index -> replacement
	single  map[int]*Module     // item index -> plain bitcode object
	ids     map[string]string   // keep names used
	idx     string              // where lld writes the index shards
	native  string              // the prefix of lld's native object names in index.txt
	missing []string            // inputs that cannot be opened (left to the linker)
	passed  map[int]string      // item index -> archive without bitcode
	members map[string][]string // archive as lld names it -> members it extracted
	forced  map[string]bool     // archives (as lld names them) whose members are forced
	// extracted holds what the thin link extracted from archives and
	// --start-lib groups, as lld names it ("dir/x.o", "lib.a(m.o)").
	extracted map[string]bool
}

// Link runs the whole flow and returns what it did.
func Link(ctx context.Context, opts Options) (res *Result, err error) {
	if opts.Dir == "" {
		if opts.Dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Run == nil {
		return nil, errors.New("thinlink: Options.Run is not set")
	}
	if len(opts.Command) == 0 {
		return nil, &Error{Step: "reading the link command", Err: errors.New("no link command given after --")}
	}
	args, err := expandResponseFiles(opts.Command, opts.Dir)
	if err != nil {
		return nil, &Error{Step: "reading the link command's response files", Err: err}
	}
	line, err := parseLinkLine(args, opts.Dir)
	if err != nil {
		return nil, &Error{Step: "reading the link command", Err: err}
	}
	if !line.usesLLD() {
		return nil, &Error{Step: "reading the link command", Err: fmt.Errorf(
			"thindist link needs lld for the thin link (--thinlto-index-only); add -fuse-ld=lld to the link command")}
	}
	p := &plan{opts: opts, line: line, modules: map[string]*Module{}, archive: map[int][]entry{},
		single: map[int]*Module{}, ids: map[string]string{}, passed: map[int]string{}}

	work := opts.WorkDir
	if work == "" {
		work = line.output + ".thindist.d"
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

	if err := p.findModules(); err != nil {
		return nil, &Error{Step: "looking for bitcode among the link's inputs", Err: err}
	}
	if len(p.order) == 0 {
		msg := "no input of the link is LLVM bitcode, so there is nothing to compile (were the objects built with -flto=thin?); " +
			"link without thindist, or check the command"
		if len(p.missing) > 0 {
			msg += fmt.Sprintf("; these inputs cannot be opened: %s", strings.Join(p.missing, ", "))
		}
		return nil, &Error{Step: "looking for bitcode among the link's inputs", Err: errors.New(msg)}
	}
	res = &Result{WorkDir: p.work}

	linked, thin, err := p.thinLink(ctx)
	res.ThinLink = thin
	if err != nil {
		return res, err
	}
	res.Modules = linked
	actions, err := p.actions(linked)
	if err != nil {
		return res, &Error{Step: "preparing the backend compilations", Err: err}
	}
	res.Actions = actions
	if len(actions) > 0 {
		if err := opts.Run(ctx, actions); err != nil {
			if !opts.KeepWorkDir && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(opts.Stderr, "thindist link: the backend compilations failed; the work directory %s is removed "+
					"(run again with --keep-work-dir to keep its index shards and re-run a command by hand)\n", p.work)
			}
			return res, err
		}
	}
	if opts.KeepNativeObjects != "" {
		if err := p.keep(linked); err != nil {
			return res, &Error{Step: "keeping the native objects in " + opts.KeepNativeObjects, Err: err}
		}
	}
	res.Final, err = p.finalLink(ctx)
	return res, err
}

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

const workMarker = ".thindist-work"

func (p *plan) makeWorkDir(work string) error {
	abs := p.abs(work)
	if strings.ContainsAny(abs, ";") {
		return fmt.Errorf("%s: the work directory's path must not contain ';' (lld's --thinlto-prefix-replace separator)", abs)
	}
	if _, err := os.Stat(abs); err == nil {
		// Left over from --keep-work-dir or a crash: only ever remove our own.
		if _, err := os.Stat(filepath.Join(abs, workMarker)); err != nil {
			return fmt.Errorf("%s exists and is not a thindist work directory; remove it or choose another with --work-dir", abs)
		}
		if err := os.RemoveAll(abs); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	p.work = p.portable(abs)
	return os.WriteFile(filepath.Join(abs, workMarker), nil, 0o644)
}

// findModules classifies every input of the link by content.
func (p *plan) findModules() error {
	nar := 0
	for i, it := range p.line.items {
		var path string
		switch it.kind {
		case itInput:
			path = it.path
		case itLib:
			path = it.path // "" when not found in a -L directory: left to the linker
		}
		if path == "" {
			continue
		}
		switch classify(p.abs(path)) {
		case KindMissing:
			p.missing = append(p.missing, path)
		case KindBitcode:
			p.single[i] = p.addModule(p.portable(path), path, mangle(path), p.abs(path), "")
		case KindArchive, KindThin:
			ar, err := readArchive(p.abs(path))
			if err != nil {
				// Left to the linker: should it hold bitcode, lld records its
				// members under names thindist does not know, which the thin
				// link step reports.
				fmt.Fprintf(p.opts.Stderr, "thindist: warning: cannot read the archive %s (%v); passing it to the linker as it is\n", path, err)
				continue
			}
			if !ar.HasBitcode() {
				p.passed[i] = path
				continue
			}
			ents, err := p.unpack(ar, path, nar)
			if err != nil {
				return fmt.Errorf("unpacking %s: %w", path, err)
			}
			nar++
			p.archive[i] = ents
		}
	}
	return nil
}

func (p *plan) addModule(key, display, keep, object, member string) *Module {
	if m, ok := p.modules[key]; ok {
		return m // the same file given twice: lld sees it twice too
	}
	if _, ok := p.ids[keep]; ok {
		for j := 2; ; j++ {
			k := fmt.Sprintf("%s.%d", keep, j)
			if _, ok := p.ids[k]; !ok {
				keep = k
				break
			}
		}
	}
	p.ids[keep] = key
	m := &Module{Key: key, Display: display, KeepName: keep, Object: object, Member: member}
	p.modules[key] = m
	p.order = append(p.order, m)
	return m
}

// unpack lists the files an archive stands for. A thin archive's members
// are its files; a regular archive's are written to <work>/ar/<n>/.
func (p *plan) unpack(ar *Archive, spelled string, n int) ([]entry, error) {
	var ents []entry
	dir := filepath.Join(p.work, "ar", fmt.Sprint(n))
	used := map[string]bool{}
	for _, m := range ar.Members {
		if ar.Thin {
			file := filepath.Join(filepath.Dir(spelled), m.Name)
			if filepath.IsAbs(m.Name) {
				file = m.Name
			}
			if !m.Bitcode {
				ents = append(ents, entry{file: file})
				continue
			}
			ents = append(ents, entry{mod: p.addModule(p.portable(file), fmt.Sprintf("%s(%s)", spelled, m.Name),
				mangle(file), p.abs(file), "")})
			continue
		}
		name := filepath.Base(m.Name)
		if name == "." || name == ".." || name == "/" || name == "" {
			name = "member"
		}
		for j := 2; used[name]; j++ {
			name = fmt.Sprintf("%d.%s", j, filepath.Base(m.Name))
		}
		used[name] = true
		file := filepath.Join(dir, name)
		if err := os.MkdirAll(p.abs(dir), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.abs(file), m.Data, 0o644); err != nil {
			return nil, err
		}
		if !m.Bitcode {
			ents = append(ents, entry{file: file})
			continue
		}
		ents = append(ents, entry{mod: p.addModule(file, fmt.Sprintf("%s(%s)", spelled, m.Name),
			mangle(spelled)+"/"+name, "", m.Name)})
	}
	return ents, nil
}

// mangle turns a path into a relative one that stays inside a directory:
// "/a/b.o" -> "a/b.o", "../x/b.o" -> "__/x/b.o".
func mangle(p string) string {
	p = filepath.ToSlash(filepath.Clean(p))
	p = strings.TrimLeft(p, "/")
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if c == ".." {
			parts[i] = "__"
		}
	}
	return strings.Join(parts, "/")
}

// render writes the link command back with each replaced item rendered by
// repl (as linker arguments); items repl returns nil for stay as they were.
func (p *plan) render(repl func(i int, it item) ([]string, bool)) []string {
	var out []string
	for i, it := range p.line.items {
		if toks, ok := repl(i, it); ok {
			for _, t := range toks {
				out = append(out, p.line.wrap(t)...)
			}
			continue
		}
		out = append(out, it.orig...)
	}
	return out
}

// group renders files for the linker: plain ones are always linked, lazy
// ones only if they define a symbol the link needs (--start-lib/--end-lib,
// the semantics of archive members). Under --whole-archive all are plain;
// inside the user's own --start-lib group a plain file closes and reopens it.
func group(it item, plain, lazy []string) []string {
	if it.whole {
		plain, lazy = append(plain, lazy...), nil
	}
	out := []string{}
	if it.lazy {
		if len(plain) > 0 {
			out = append(append(append(out, "--end-lib"), plain...), "--start-lib")
		}
		return append(out, lazy...)
	}
	out = append(out, plain...)
	if len(lazy) > 0 {
		out = append(append(append(out, "--start-lib"), lazy...), "--end-lib")
	}
	return out
}

// setPrefixes chooses the directories lld writes shards into and names
// native objects under: nested deep enough that a module path climbing with
// ".." stays inside the work directory.
func (p *plan) setPrefixes() {
	depth := 0
	for _, m := range p.order {
		depth = max(depth, action.UpLevels(m.Key))
	}
	nest := strings.Repeat("/u", depth)
	p.idx = filepath.Join(p.work, "idx") + nest + "/"
	p.native = filepath.Join(p.work, "lld-native") + nest + "/"
}

// thinLink runs the thin link and returns the modules lld lists, in link order.
func (p *plan) thinLink(ctx context.Context) ([]*Module, []string, error) {
	p.setPrefixes()
	idx, native := p.idx, p.native
	indexFile := filepath.Join(p.work, "index.txt")
	args := p.render(func(i int, it item) ([]string, bool) {
		if m, ok := p.single[i]; ok {
			return []string{m.Key}, true
		}
		if ents, ok := p.archive[i]; ok {
			var files []string
			for _, e := range ents {
				if e.mod != nil {
					files = append(files, e.mod.Key)
				} else {
					files = append(files, e.file)
				}
			}
			return group(it, nil, files), true
		}
		return nil, false
	})
	whyFile := filepath.Join(p.work, "why-extract.txt")
	// No --thinlto-emit-imports-files: each module's imports are read from
	// its shard (see imports), and on ext4 creating those 500 extra files
	// took longer than the thin link itself (bench/RESULTS.md, finding 4).
	for _, f := range []string{"--why-extract=" + whyFile, "--thinlto-index-only=" + indexFile,
		"--thinlto-prefix-replace=;" + idx + ";" + native} {
		args = append(args, p.line.wrap(f)...)
	}
	rsp := filepath.Join(p.work, "thin-link.rsp")
	if err := writeResponseFile(p.abs(rsp), args); err != nil {
		return nil, nil, &Error{Step: "writing the thin link's response file", Err: err}
	}
	cmd := []string{p.line.compiler, "@" + rsp}
	const step = "the thin link (step 1 of 3: lld --thinlto-index-only computes imports and index shards)"
	out, err := p.run(ctx, cmd, nil)
	if err != nil {
		return nil, cmd, &Error{Step: step, Err: fmt.Errorf("%v%s\n  command: %s", err, hint(out), action.ShellQuote(cmd)), Output: out}
	}
	if p.opts.Verbose && out != "" {
		io.WriteString(p.opts.Stderr, out)
	}
	data, err := os.ReadFile(p.abs(indexFile))
	if err != nil {
		return nil, cmd, &Error{Step: step, Err: fmt.Errorf("the linker exited 0 but wrote no index file %s: %v", indexFile, err), Output: out}
	}
	if err := p.readWhyExtract(whyFile); err != nil {
		return nil, cmd, &Error{Step: step, Err: err, Output: out}
	}
	var linked []*Module
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			continue
		}
		key, ok := strings.CutPrefix(l, native)
		m := p.modules[key]
		if !ok || m == nil {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"lld listed the native object %q, which is not a module thindist put on the link line under that path. "+
					"The backend must be given exactly the path lld recorded, or it writes an object with no symbols; "+
					"bitcode reached through a linker script, a -l library outside the command's -L directories, or "+
					"-Wl,@file is not supported: pass it to the link by path", l)}
		}
		if m.linked {
			continue
		}
		m.linked = true
		linked = append(linked, m)
	}
	// Every module the link uses needs an index shard named after exactly
	// the path lld recorded: a shard under another name means lld recorded
	// another spelling, and the backend would silently compile nothing.
	for _, m := range linked {
		shard := p.shard(m)
		if _, err := os.Stat(p.abs(shard)); err != nil {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"module %s: lld wrote no index shard %s: the path it recorded differs from %q", m.Display, shard, m.Key)}
		}
	}
	// A non-lazy module the link does not list would vanish from the program.
	for i, m := range p.single {
		if !m.linked && !p.line.items[i].lazy {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"lld listed no native object for %s, although it is not in a library; is it full-LTO bitcode "+
					"(-flto rather than -flto=thin)? thindist link handles ThinLTO modules only", m.Display)}
		}
	}
	return linked, cmd, nil
}

// readWhyExtract records what the thin link extracted from archives and
// --start-lib groups (lld's --why-extract, written in index-only mode by lld
// 19 and 22 alike): the final link must link exactly those, even when the
// optimised code no longer refers to them (a member kept for its static
// constructor), as in-process ThinLTO does.
func (p *plan) readWhyExtract(path string) error {
	lines, err := readLines(p.abs(path))
	if err != nil {
		return fmt.Errorf("the linker wrote no --why-extract file: %v", err)
	}
	p.extracted = map[string]bool{}
	p.members = map[string][]string{}
	p.forced = map[string]bool{}
	for _, l := range lines[min(1, len(lines)):] { // a header line first
		f := strings.Split(l, "\t")
		if len(f) < 2 {
			continue
		}
		p.extracted[f[1]] = true
		if i := strings.LastIndex(f[1], "("); i > 0 && strings.HasSuffix(f[1], ")") {
			a := f[1][:i]
			p.members[a] = append(p.members[a], f[1][i+1:len(f[1])-1])
		}
	}
	return nil
}

// forcedMembers returns the members of an archive without bitcode that the
// thin link extracted, as files (written out for a regular archive), so the
// final link links them whatever the optimised code still refers to. The
// archive stays on the link line for what the native code newly needs
// (runtime library calls), as after an in-process LTO.
func (p *plan) forcedMembers(i int, spelled string) ([]string, error) {
	var names []string
	for a, ms := range p.members {
		// lld spells the archive as it opened it (a -l search builds
		// "dir/libx.a"): compare files, not strings. An archive given twice
		// has its members forced once.
		if !p.forced[a] && sameFile(p.abs(a), p.abs(spelled)) {
			p.forced[a] = true
			names = append(names, ms...)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	ar, err := readArchive(p.abs(spelled))
	if err != nil {
		return nil, err
	}
	var files []string
	for _, name := range names {
		var found []Member
		for _, m := range ar.Members {
			if filepath.Base(m.Name) == name {
				found = append(found, m)
			}
		}
		if len(found) != 1 {
			fmt.Fprintf(p.opts.Stderr, "thindist: warning: %s has %d members named %s; leaving it to archive semantics\n", spelled, len(found), name)
			continue
		}
		if ar.Thin {
			files = append(files, filepath.Join(filepath.Dir(spelled), found[0].Name))
			continue
		}
		file := filepath.Join(p.work, "forced", fmt.Sprint(i), name)
		if err := os.MkdirAll(filepath.Dir(p.abs(file)), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.abs(file), found[0].Data, 0o644); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// shard names the index shard lld wrote for m: the module path appended to
// the index prefix (lld resolves ".." in it, as Join does).
func (p *plan) shard(m *Module) string { return filepath.Join(p.idx, m.Key) + ".thinlto.bc" }

// imports are the modules m imports from: the module table of its shard
// without m itself. That table is the set lld's
// --thinlto-emit-imports-files would write (both come from the same
// module-to-summaries map of the thin link), in the shard's order.
func (p *plan) imports(m *Module) ([]string, error) {
	data, err := os.ReadFile(p.abs(p.shard(m)))
	if err != nil {
		return nil, fmt.Errorf("reading the index shard lld wrote: %v", err)
	}
	table, err := bitcode.ModuleTable(data)
	if err != nil {
		return nil, fmt.Errorf("reading the index shard %s: %v", p.shard(m), err)
	}
	var imports []string
	self := false
	for _, t := range table {
		if t.Path == m.Key {
			self = true
			continue
		}
		imports = append(imports, t.Path)
	}
	if !self {
		return nil, fmt.Errorf("the index shard %s does not name the module %q itself", p.shard(m), m.Key)
	}
	return imports, nil
}

// actions builds one backend action per linked module.
func (p *plan) actions(linked []*Module) ([]*action.Action, error) {
	compiler, err := p.compiler()
	if err != nil {
		return nil, err
	}
	base, profiles := p.line.backendFlags()
	var actions []*action.Action
	var unmatched []string
	defer func() {
		if len(unmatched) > 0 {
			more := ""
			if len(unmatched) > 5 {
				more = fmt.Sprintf(" and %d more", len(unmatched)-5)
				unmatched = unmatched[:5]
			}
			fmt.Fprintf(p.opts.Stderr, "thindist: note: no compile command in the compilation database wrote %s%s; "+
				"they use the link's options\n", strings.Join(unmatched, ", "), more)
		}
	}()
	for n, m := range linked {
		m.Native = filepath.Join(p.work, "native", fmt.Sprintf("%d.%s.o", n, filepath.Base(m.KeepName)))
		a := &action.Action{ID: m.Display, Dir: p.opts.Dir}
		a.Inputs = []action.Input{{Path: m.Key, Role: action.RoleModule}, {Path: p.shard(m), Role: action.RoleIndex}}
		imports, err := p.imports(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m.Display, err)
		}
		for _, imp := range imports {
			im := p.modules[imp]
			if im == nil || !im.linked {
				return nil, fmt.Errorf("%s imports from %q, which is not a module of this link under that path", m.Display, imp)
			}
			a.Inputs = append(a.Inputs, action.Input{Path: imp, Role: action.RoleImport})
		}
		a.Args = []action.Arg{action.Lit(compiler)}
		for _, f := range base {
			a.Args = append(a.Args, action.Lit(f))
		}
		addProfile := func(flag, path string) {
			a.Inputs = append(a.Inputs, action.Input{Path: path, Role: action.RoleCommon})
			a.Args = append(a.Args, action.In(flag, len(a.Inputs)-1))
		}
		for _, prof := range profiles {
			addProfile("-fprofile-sample-use=", p.portable(prof))
		}
		cc := p.opts.CompDB.lookup(m.Object, m.Member)
		if cc == nil && p.opts.CompDB != nil {
			unmatched = append(unmatched, m.Display)
		}
		if cc != nil {
			for _, f := range frontendFiltered(cc.args) {
				if v, ok := strings.CutPrefix(f, "-fprofile-sample-use="); ok {
					if !filepath.IsAbs(v) {
						v = filepath.Join(cc.dir, v)
					}
					addProfile("-fprofile-sample-use=", p.portable(v))
					continue
				}
				a.Args = append(a.Args, action.Lit(f))
			}
		}
		a.Args = append(a.Args, action.Lit("-Wno-unused-command-line-argument"),
			action.Lit("-c"), action.Lit("-x"), action.Lit("ir"), action.In("", 0),
			action.In("-fthinlto-index=", 1), action.Lit("-o"), action.Out("", 0))
		a.Outputs = []action.Output{{Path: m.Native}}
		if err := os.MkdirAll(filepath.Dir(p.abs(m.Native)), 0o755); err != nil {
			return nil, err
		}
		if err := a.Validate(); err != nil {
			return nil, err
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// compiler returns the clang that runs the backends: Options.Compiler, the
// link's own driver, or for ld.lld run directly the clang installed beside
// it (ld.lld-19 -> clang-19), since the backend must be the LLVM that wrote
// the index.
func (p *plan) compiler() (string, error) {
	resolve := func(c string) string {
		if !strings.ContainsRune(c, '/') {
			if lp, err := exec.LookPath(c); err == nil {
				return lp
			}
			return c
		}
		return p.abs(c)
	}
	if p.opts.Compiler != "" {
		return resolve(p.opts.Compiler), nil
	}
	if !p.line.direct {
		return resolve(p.line.compiler), nil
	}
	ld := resolve(p.line.compiler)
	suffix := strings.TrimPrefix(filepath.Base(ld), "ld.lld")
	for _, cand := range []string{ld, ""} {
		if cand == "" {
			real, err := filepath.EvalSymlinks(ld)
			if err != nil {
				break
			}
			cand = real
			suffix = ""
		}
		c := filepath.Join(filepath.Dir(cand), "clang"+suffix)
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("cannot find the clang of the same LLVM as %s to run the backends; give it with --compiler", p.line.compiler)
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

// keep copies every native object to its KeepName under the directory.
func (p *plan) keep(linked []*Module) error {
	dir := p.opts.KeepNativeObjects
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(p.opts.Dir, dir)
	}
	for _, m := range linked {
		dst := filepath.Join(dir, filepath.FromSlash(m.KeepName))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(p.abs(m.Native))
		if err != nil {
			return err
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	return nil
}

// finalLink runs the link with native objects in place of the bitcode.
func (p *plan) finalLink(ctx context.Context) ([]string, error) {
	var forceErr error
	// A file linked as a plain object must appear once, although an archive
	// (a thin one: the same member files) may be given twice.
	seen := map[string]bool{}
	once := func(files []string) []string {
		var out []string
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		return out
	}
	args := p.render(func(i int, it item) ([]string, bool) {
		if m, ok := p.single[i]; ok {
			if !m.linked {
				return []string{}, true // a lazy module the link did not use
			}
			return group(it, once([]string{m.Native}), nil), true
		}
		if ents, ok := p.archive[i]; ok {
			var plain, lazy []string
			for _, e := range ents {
				switch {
				case e.mod != nil && e.mod.linked:
					plain = append(plain, e.mod.Native)
				case e.mod != nil: // a bitcode member the link did not use
				case p.extracted[e.file]:
					plain = append(plain, e.file)
				default:
					lazy = append(lazy, e.file)
				}
			}
			return group(it, once(plain), lazy), true
		}
		if spelled, ok := p.passed[i]; ok {
			forced, err := p.forcedMembers(i, spelled)
			if err != nil {
				forceErr = err
			}
			if forced = once(forced); len(forced) > 0 {
				self := it.path
				if it.kind == itLib {
					self = "-l" + it.lib
				}
				return append(group(it, forced, nil), self), true
			}
			return nil, false
		}
		if it.kind == itInput && it.lazy && p.extracted[it.path] {
			return group(it, once([]string{it.path}), nil), true
		}
		return nil, false
	})
	if forceErr != nil {
		return nil, &Error{Step: "extracting archive members for the final link", Err: forceErr}
	}
	rsp := filepath.Join(p.work, "final-link.rsp")
	if err := writeResponseFile(p.abs(rsp), args); err != nil {
		return nil, &Error{Step: "writing the final link's response file", Err: err}
	}
	cmd := []string{p.line.compiler, "@" + rsp}
	out, err := p.run(ctx, cmd, p.opts.Stdout)
	if err != nil {
		// lld's --thinlto-index-only stops before it checks for undefined
		// symbols, so those are reported here, as an in-process link
		// reports them after its backends.
		return cmd, &Error{Step: "the final link (step 3 of 3: linking the native objects)",
			Err: fmt.Errorf("%v\n  command: %s", err, action.ShellQuote(cmd)), Output: out}
	}
	io.WriteString(p.opts.Stderr, out) // the linker's warnings
	return cmd, nil
}

// run runs a link command in the link's directory and returns its stderr.
func (p *plan) run(ctx context.Context, argv []string, stdout io.Writer) (string, error) {
	if p.opts.Verbose {
		fmt.Fprintf(p.opts.Stderr, "thindist: running %s\n", action.ShellQuote(argv))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.opts.Dir
	// On cancellation let the driver and lld remove their temporary files.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout != nil {
		cmd.Stdout = stdout
	} else {
		cmd.Stdout = &stderr
	}
	err := cmd.Run()
	return stderr.String(), err
}

// hint explains a thin-link failure caused by an lld that lacks an option
// of the separate thin-link flow: it names the options lld rejected.
func hint(out string) string {
	var missing []string
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, "unknown argument '")
		if !ok {
			continue
		}
		arg, _, _ := strings.Cut(rest, "'")
		for _, f := range []string{"--thinlto-index-only", "--thinlto-prefix-replace", "--why-extract"} {
			if arg == f || strings.HasPrefix(arg, f+"=") {
				missing = append(missing, f)
			}
		}
	}
	if strings.Contains(out, "--thinlto-prefix-replace") && strings.Contains(out, "expects") {
		missing = append(missing, "--thinlto-prefix-replace=old;new;native (the three-part form)")
	}
	if len(missing) == 0 {
		return ""
	}
	sort.Strings(missing)
	return fmt.Sprintf("\n  your lld does not support %s, which thindist link needs for the separate thin link; "+
		"use a newer lld (LLVM 19 and 22 are known to work) with -fuse-ld=lld or --ld-path=",
		strings.Join(missing, ", "))
}
