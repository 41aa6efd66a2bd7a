package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The link command is a clang driver command line. thindist keeps it as it
// is, except for the linker inputs that hold bitcode: those it finds (plain
// objects, archives given by path or through -l, also inside -Wl, and
// -Xlinker) so that the thin link can see archive members as files of their
// own and the final link can see native objects in their place. (The
// options of `thindist link` itself, before the command, are linkflags'.)

type itemKind uint8

const (
	itVerbatim itemKind = iota // driver arguments kept as they are
	itLinker                   // one linker argument (from -Wl, or -Xlinker)
	itInput                    // a linker input file
	itLib                      // -l<spec>
)

type item struct {
	kind itemKind
	orig []string // how to write the item back unchanged
	// path is the input as spelled (itInput) or the file -l resolved to
	// (itLib, "" when thindist does not find it in a -L directory).
	path      string
	lib       string // the -l spec, e.g. "foo" or ":libfoo.a"
	viaLinker bool   // given inside -Wl, or -Xlinker
	whole     bool   // --whole-archive in effect
	lazy      bool   // inside the user's own --start-lib ... --end-lib
	group     bool   // inside the user's own --start-group ... --end-group
	static    bool   // -Bstatic in effect (for -l)
}

// linkLine is a parsed link command.
type linkLine struct {
	compiler    string
	items       []item
	output      string
	shared      bool
	relocatable bool
	static      bool
	pie         bool // --pie given to the linker
	direct      bool // the command runs lld itself, not the clang driver
	searchDirs  []string
	// endLazy and endGroup are the --start-lib and --start-group state at
	// the end of the command, where the final link adds the native objects.
	endLazy, endGroup bool
	depFile           string   // the linker's --dependency-file, "" if none
	driverArgs        []string // every driver argument, for flags
	linkerArgs        []string // every linker argument (from -Wl, and -Xlinker), for flags
}

// driverSeparate lists clang driver options whose value is the next
// argument, so that value is not taken for an input file.
var driverSeparate = map[string]bool{
	"-x": true, "-target": true, "-arch": true, "-Xclang": true, "-mllvm": true,
	"-Xassembler": true, "-Xpreprocessor": true, "-Xarch_device": true, "-Xarch_host": true,
	"-include": true, "-imacros": true, "-isystem": true, "-idirafter": true, "-iquote": true,
	"-iprefix": true, "-iwithprefix": true, "-isysroot": true, "-I": true, "-D": true, "-U": true,
	"-MF": true, "-MT": true, "-MQ": true, "-MJ": true, "-T": true, "-z": true, "-u": true,
	"-e": true, "-rpath": true, "-B": true, "--sysroot": true, "-F": true, "--param": true,
	"-dependency-file": true, "-Xoffload-linker": true, "-Xopenmp-target": true,
	"-ccc-install-dir": true, "--serialize-diagnostics": true, "-install_name": true,
	"-framework": true, "-gcc-toolchain": true, "--gcc-toolchain": true, "-aux-info": true,
}

// linkerSeparate lists lld (ELF) options whose value is the next argument,
// named without leading dashes (lld accepts - and -- alike).
var linkerSeparate = map[string]bool{
	"o": true, "L": true, "library-path": true, "l": true, "library": true, "T": true,
	"script": true, "Map": true, "rpath": true, "R": true, "soname": true, "h": true,
	"e": true, "entry": true, "u": true, "undefined": true, "z": true, "m": true,
	"version-script": true, "dynamic-list": true, "y": true, "trace-symbol": true,
	"defsym": true, "wrap": true, "plugin-opt": true, "plugin": true, "F": true, "f": true,
	"filter": true, "auxiliary": true, "b": true, "format": true, "init": true, "fini": true,
	"sysroot": true, "exclude-libs": true, "dynamic-linker": true, "I": true,
	"export-dynamic-symbol": true, "export-dynamic-symbol-list": true,
	"retain-symbols-file": true, "symbol-ordering-file": true, "call-graph-ordering-file": true,
	"just-symbols": true, "Ttext": true, "Tdata": true, "Tbss": true, "image-base": true,
	"mllvm": true, "section-start": true, "undefined-glob": true, "require-defined": true,
	"dependency-file": true, "error-limit": true, "hash-style": true, "emulation": true,
	"remap-inputs-file": true, "why-extract": true, "package-metadata": true,
	"thinlto-cache-dir": true, "lto-O": false, "build-id": false, "soname-prefix": true,
	"rsp-quoting": true, "Tsegment": true, "Trodata-segment": true, "icf": false,
}

// parseLinkLine parses args (argv with the compiler first, response files
// already expanded): the arguments of lld itself if direct, else of the clang
// driver. dir is the directory the command runs in.
func parseLinkLine(args []string, dir string, direct bool) (*linkLine, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no link command given")
	}
	l := &linkLine{compiler: args[0], output: "a.out", direct: direct}
	p := &linkParser{l: l, dir: dir}
	if direct {
		for _, a := range args[1:] {
			p.linker(a)
		}
	} else {
		p.driver(args[1:])
	}
	l.endLazy, l.endGroup = p.lazy, p.group
	// lld searches every -L directory, wherever it appears, for every -l.
	for i := range l.items {
		it := &l.items[i]
		if it.kind == itLib {
			it.path = l.findLib(it.lib, it.static || l.static, dir)
		}
	}
	return l, nil
}

// linkParser is parseLinkLine's state: the line being built and the
// positional options in effect for the inputs that follow.
type linkParser struct {
	l                          *linkLine
	dir                        string // the directory the command runs in
	whole, lazy, group, static bool
	pending                    string // a linker option waiting for its value
	rspDepth                   int    // nesting of linker response files
}

// driver parses the clang driver's arguments (after the compiler),
// handing what goes to the linker (-Wl, -Xlinker) to linker.
func (p *linkParser) driver(args []string) {
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		p.driverArg(args[i], next)
	}
}

// driverArg parses one driver argument a; next consumes and returns the
// argument after it ("" at the end).
func (p *linkParser) driverArg(a string, next func() string) {
	l := p.l
	verbatim := func(orig ...string) {
		l.items = append(l.items, item{kind: itVerbatim, orig: orig})
		l.driverArgs = append(l.driverArgs, orig...)
	}
	switch {
	case a == "-o":
		l.output = next()
		verbatim(a, l.output)
	case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "-obj") && !strings.HasPrefix(a, "-opt"):
		l.output = a[2:]
		verbatim(a)
	case strings.HasPrefix(a, "-Wl,"):
		for _, tok := range strings.Split(a[4:], ",") {
			p.linker(tok)
		}
	case a == "-Xlinker":
		p.linker(next())
	case a == "-l":
		v := next()
		l.items = append(l.items, item{kind: itLib, lib: v, orig: []string{a, v}, static: p.static || l.static, whole: p.whole, lazy: p.lazy, group: p.group})
	case strings.HasPrefix(a, "-l") && len(a) > 2:
		l.items = append(l.items, item{kind: itLib, lib: a[2:], orig: []string{a}, static: p.static || l.static, whole: p.whole, lazy: p.lazy, group: p.group})
	case a == "-L":
		v := next()
		l.searchDirs = append(l.searchDirs, v)
		verbatim(a, v)
	case strings.HasPrefix(a, "-L"):
		l.searchDirs = append(l.searchDirs, a[2:])
		verbatim(a)
	case a == "-shared":
		l.shared = true
		verbatim(a)
	case a == "-r":
		l.relocatable = true
		verbatim(a)
	case a == "-static":
		l.static = true
		verbatim(a)
	case driverSeparate[a]:
		verbatim(a, next())
	case strings.HasPrefix(a, "-") && a != "-":
		verbatim(a)
	default:
		l.items = append(l.items, item{kind: itInput, path: a, orig: []string{a}, whole: p.whole, lazy: p.lazy, group: p.group})
	}
}

// linker parses one argument of lld itself: an @response file, the value
// of a pending option, an option, or an input.
func (p *linkParser) linker(tok string) {
	if strings.HasPrefix(tok, "@") && len(tok) > 1 && p.pending == "" && p.rspDepth < 20 && p.responseFile(tok[1:]) {
		return
	}
	p.l.linkerArgs = append(p.l.linkerArgs, tok)
	if p.pending != "" {
		opt := p.pending
		p.pending = ""
		p.linkerValue(opt, tok)
		return
	}
	if strings.HasPrefix(tok, "-") {
		p.linkerOption(tok)
		return
	}
	p.add(tok, item{kind: itInput, path: tok, whole: p.whole, lazy: p.lazy, group: p.group})
}

// responseFile parses a linker response file, if it can be read: lld
// reads it with GNU quoting, paths relative to the directory it runs in.
// It reports false, having done nothing, when the file cannot be read.
func (p *linkParser) responseFile(f string) bool {
	if !filepath.IsAbs(f) {
		f = filepath.Join(p.dir, f)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	p.rspDepth++
	for _, t := range tokenizeGNU(string(data)) {
		p.linker(t)
	}
	p.rspDepth--
	return true
}

// add records tok, parsed as it, as an item that came through the linker.
func (p *linkParser) add(tok string, it item) {
	it.viaLinker = true
	if it.orig == nil {
		it.orig = p.l.wrap(tok)
	}
	p.l.items = append(p.l.items, it)
}

// lib records -l spec (val) with the positional options in effect.
func (p *linkParser) lib(tok, spec string) {
	p.add(tok, item{kind: itLib, lib: spec, static: p.static, whole: p.whole, lazy: p.lazy, group: p.group})
}

// linkerValue parses tok, the value of the separate linker option opt.
func (p *linkParser) linkerValue(opt, tok string) {
	switch opt {
	case "l", "library":
		p.lib(tok, tok)
		return
	case "L", "library-path":
		p.l.searchDirs = append(p.l.searchDirs, tok)
	case "o":
		p.l.output = tok
	case "dependency-file":
		p.l.depFile = tok
	}
	p.add(tok, item{kind: itLinker})
}

// linkerOption parses tok, a linker option ("-x" or "--x", with or
// without "=value").
func (p *linkParser) linkerOption(tok string) {
	name := strings.TrimLeft(tok, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		val := name[i+1:]
		switch name[:i] {
		case "library":
			p.lib(tok, val)
			return
		case "library-path":
			p.l.searchDirs = append(p.l.searchDirs, val)
		case "dependency-file":
			p.l.depFile = val
		}
		p.add(tok, item{kind: itLinker})
		return
	}
	switch name {
	case "whole-archive":
		p.whole = true
	case "no-whole-archive":
		p.whole = false
	case "start-lib":
		p.lazy = true
	case "end-lib":
		p.lazy = false
	case "start-group", "(":
		p.group = true
	case "end-group", ")":
		p.group = false
	case "Bstatic", "static", "dn", "non_shared":
		p.static = true
	case "Bdynamic", "dy", "call_shared":
		p.static = false
	case "r", "relocatable":
		p.l.relocatable = true
	case "shared", "Bshareable":
		p.l.shared = true
	case "no-pie", "nopie", "no-pic-executable":
		p.l.pie = false
	case "pie", "pic-executable":
		p.l.pie = true
	default:
		switch {
		case linkerSeparate[name]:
			p.pending = name
		case strings.HasPrefix(tok, "-l") && len(tok) > 2:
			p.lib(tok, tok[2:])
			return
		case strings.HasPrefix(tok, "-L") && len(tok) > 2:
			p.l.searchDirs = append(p.l.searchDirs, tok[2:])
		}
	}
	p.add(tok, item{kind: itLinker})
}

// wrap renders one linker argument for the command: as is for ld.lld,
// after -Xlinker for the clang driver.
func (l *linkLine) wrap(tok string) []string {
	if l.direct {
		return []string{tok}
	}
	return []string{"-Xlinker", tok}
}

// findLib resolves -l<spec> the way lld does, but only in the -L
// directories of the command: the driver's own directories hold system
// libraries, which are not bitcode. "" means not found there. The path is
// spelled as lld spells it (the directory as given, a separator, the
// name), since lld names the library's members after it (names.go).
func (l *linkLine) findLib(spec string, static bool, dir string) string {
	var names []string
	if strings.HasPrefix(spec, ":") {
		names = []string{spec[1:]}
	} else {
		if !static {
			names = append(names, "lib"+spec+".so")
		}
		names = append(names, "lib"+spec+".a")
	}
	for _, d := range l.searchDirs {
		for _, n := range names {
			p := n
			if d != "" && !strings.HasSuffix(d, "/") {
				p = d + "/" + n
			} else if d != "" {
				p = d + n
			}
			abs := p
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(dir, abs)
			}
			if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	return ""
}
