package thinlink

import (
	"fmt"
	"strings"
)

// backendFlags returns the backend options that reproduce what the linker's
// in-process ThinLTO does for this link (lld sets the same in its LTO
// configuration, and lld 22 passes the same to DTLTO jobs):
//
//   - -O<n>: the driver passes the link's -O level to lld as
//     -plugin-opt=O<n> (-Os/-Oz/-Og as O2/O2/O1, -Ofast as O3); lld's
//     default is O2.
//   - -ffunction-sections -fdata-sections -faddrsig: lld always enables them
//     for LTO code, so --gc-sections and --icf work on it.
//   - -march, -mcpu, -mtune: the driver derives -plugin-opt=mcpu from them.
//     The linker's own --lto-O<n>, --plugin-opt=O<n> and
//     --plugin-opt=mcpu= override the driver's; its -O<n> is lld's own
//     optimization of the link, no LTO level. At O1, -funroll-loops
//     (below).
//   - the linker's own -mllvm options (ld.lld -mllvm X, -Wl,-mllvm,X), which
//     lld applies to its LTO backends. A driver's -mllvm is not passed to
//     the linker (clang warns that it is unused), so in-process ThinLTO
//     ignores it, and so does this.
//   - -fprofile-sample-use: the sample profile is applied again after
//     importing; the file becomes a common input of every action.
//   - -Wno-unused-command-line-argument, because some of these mean nothing
//     for IR input.
//
// The target triple and the relocation model depend on each module: see
// moduleFlags. lld are the options lld 22 gives every DTLTO job, in its
// order; extra the others (target CPU, -mllvm), which lld's DTLTO drops.
// The returned profile lists input files every backend reads.
func (l *linkLine) backendFlags() (lld, extra, profiles []string) {
	opt := "-O2"
	var target []string
	var mllvm []string
	args := l.driverArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-O" || a == "-O1" || a == "-Og":
			opt = "-O1"
		case a == "-O0":
			opt = "-O0"
		case a == "-O2" || a == "-Os" || a == "-Oz":
			opt = "-O2"
		case a == "-O3" || a == "-O4" || a == "-Ofast":
			opt = "-O3"
		case strings.HasPrefix(a, "-march=") || strings.HasPrefix(a, "-mcpu=") || strings.HasPrefix(a, "-mtune="):
			target = append(target, a)
		case strings.HasPrefix(a, "-fprofile-sample-use="), strings.HasPrefix(a, "-fauto-profile="):
			p := a[strings.IndexByte(a, '=')+1:]
			profiles = append(profiles, p)
		}
	}
	// Linker options that set in-process ThinLTO's level or CPU directly
	// win over the driver's, as they do in lld. lld's own -O<n> (-Wl,-O1,
	// Meson's and many distributions' default) optimizes the link itself,
	// not the LTO code, and is no LTO level.
	for i := 0; i < len(l.linkerArgs); i++ {
		a := l.linkerArgs[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		var value string
		switch {
		case name == "mllvm" || name == "plugin-opt":
			if i+1 >= len(l.linkerArgs) {
				continue
			}
			i++
			value = l.linkerArgs[i]
		case linkerSeparate[name]:
			i++ // the value of another option, such as -o O2
			continue
		case strings.HasPrefix(name, "mllvm="), strings.HasPrefix(name, "plugin-opt="):
			name, value, _ = strings.Cut(name, "=")
		case strings.HasPrefix(a, "--lto-O"):
			// lld takes --lto-O with two dashes only (-lto-O1 is -l to-O1).
			if o, ok := ltoLevel(a[len("--lto-"):]); ok {
				opt = o
			}
			continue
		default:
			continue
		}
		if name == "mllvm" {
			mllvm = append(mllvm, "-mllvm", value)
			continue
		}
		if o, ok := ltoLevel(value); ok {
			opt = o
		} else if cpu, ok := strings.CutPrefix(value, "mcpu="); ok {
			// -mcpu= is not a driver option on every target (x86).
			target = append(target, "-Xclang", "-target-cpu", "-Xclang", cpu)
		}
	}
	lld = []string{opt, "-faddrsig", "-ffunction-sections", "-fdata-sections"}
	extra = target
	if opt == "-O1" {
		// lld's LTO at O1 unrolls and interleaves loops (LLVM's pipeline
		// defaults); clang's -O1 turns both off unless asked. lld's own
		// DTLTO jobs lack this, so their O1 code differs from in-process.
		extra = append(extra, "-funroll-loops")
	}
	return lld, append(extra, mllvm...), profiles
}

// ltoLevel reads an LTO optimization level as lld's --lto-O and
// --plugin-opt= spell it ("O0" to "O3") as the backend's -O option.
func ltoLevel(v string) (string, bool) {
	if len(v) == 2 && v[0] == 'O' && v[1] >= '0' && v[1] <= '3' {
		return "-" + v, true
	}
	return "", false
}

// withoutForcedSections returns the backend options lld gives every module
// without the section options it forces (Options.SectionsAsCompiled): a
// backend then puts code and data in the sections its module's own compile
// options ask for. Few, large sections make a large final link (such as
// vmlinux) much faster, since the linker's time grows with the number of
// input sections; --gc-sections can then only drop whole sections, and so
// keeps more.
func withoutForcedSections(lld []string) []string {
	var out []string
	for _, f := range lld {
		if f != "-ffunction-sections" && f != "-fdata-sections" {
			out = append(out, f)
		}
	}
	return out
}

// gcSections reports whether the link removes unused sections.
func (l *linkLine) gcSections() bool {
	gc := false
	for _, a := range l.linkerArgs {
		switch strings.TrimLeft(a, "-") {
		case "gc-sections":
			gc = true
		case "no-gc-sections":
			gc = false
		}
	}
	return gc
}

// codegenNote says why the backends' code differs from lld's in-process
// ThinLTO at this LTO level, or returns "". lld runs its code generator at
// --lto-CGO<n>, by default the LTO level but at least 2; clang's backend
// ties it to -O<n> (-O0: none, -O1: 1), with no option to set it apart. At
// O1 the two levels make the same x86 code for the programs tested
// (TestLTOLevelAsLLD); at O0, or with a --lto-CGO<n> other than the
// backend's own level, they do not.
func (l *linkLine) codegenNote(opt string) string {
	level := int(opt[len(opt)-1] - '0')
	lld := min(max(level, 2), 3)
	cgo := ""
	for _, a := range l.linkerArgs {
		if v, ok := strings.CutPrefix(a, "--lto-CGO"); ok && len(v) == 1 && v[0] >= '0' && v[0] <= '3' {
			lld, cgo = int(v[0]-'0'), a
		}
	}
	switch {
	case lld == level || (level == 1 && cgo == ""):
		return ""
	case cgo != "":
		return fmt.Sprintf("%s sets lld's code generation level apart from the LTO level (%s), which clang's backends cannot: "+
			"their code differs from lld's in-process ThinLTO", cgo, opt)
	}
	return fmt.Sprintf("at LTO level %s lld's in-process ThinLTO generates code at level %d and clang's backends at level %d: "+
		"their code differs from lld's in-process ThinLTO, as lld's own DTLTO's does (lld's with --lto-CGO%d would not)", opt[1:], lld, level, level)
}
