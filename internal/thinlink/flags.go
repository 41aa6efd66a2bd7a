package thinlink

import (
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
//     --plugin-opt=mcpu= override the driver's.
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
	// win over the driver's, as they do in lld.
	for i := 0; i < len(l.linkerArgs); i++ {
		a := l.linkerArgs[i]
		v := strings.TrimLeft(a, "-")
		if v == "mllvm" && i+1 < len(l.linkerArgs) {
			i++
			mllvm = append(mllvm, "-mllvm", l.linkerArgs[i])
			continue
		}
		if o, ok := strings.CutPrefix(v, "mllvm="); ok {
			mllvm = append(mllvm, "-mllvm", o)
			continue
		}
		v = strings.TrimPrefix(strings.TrimPrefix(v, "plugin-opt="), "lto-")
		switch {
		case len(v) == 2 && v[0] == 'O' && v[1] >= '0' && v[1] <= '3':
			opt = "-" + v
		case strings.HasPrefix(v, "mcpu="):
			// -mcpu= is not a driver option on every target (x86).
			target = append(target, "-Xclang", "-target-cpu", "-Xclang", v[len("mcpu="):])
		}
	}
	lld = []string{opt, "-faddrsig", "-ffunction-sections", "-fdata-sections"}
	return lld, append(target, mllvm...), profiles
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
