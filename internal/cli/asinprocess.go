package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
)

// asInProcess gives lld's DTLTO jobs what lld's in-process ThinLTO uses
// and lld 22's job file leaves out, where thindist can tell (docs/link.md,
// "Not byte-identical to in-process").
func asInProcess(actions []*action.Action) {
	pinRelocationModel(actions)
	unrollAtO1(actions)
}

// unrollAtO1 gives the actions of LTO level 1 -funroll-loops: lld's LTO
// pipeline unrolls and interleaves loops at every level (LLVM's defaults)
// where clang's -O1 turns both off, and lld's job file says only -O1. An
// action whose command already says whether to unroll is left alone.
func unrollAtO1(actions []*action.Action) {
	for _, a := range actions {
		o1, says := false, false
		for _, arg := range a.Args {
			if arg.Kind != action.Literal {
				continue
			}
			switch arg.Text {
			case "-O1":
				o1 = true
			case "-O0", "-O2", "-O3":
				o1 = false
			case "-funroll-loops", "-fno-unroll-loops":
				says = true
			}
		}
		if o1 && !says {
			insertArg(a, afterNoUnused(a), "-funroll-loops")
		}
	}
}

// pinRelocationModel gives each action lld's in-process relocation model
// where lld's job file leaves it to clang's default. lld 22 puts -fpic in
// the common options when its LTO configuration is PIC (a -pie or -shared
// link) and nothing otherwise (llvm/lib/DTLTO/DTLTO.cpp,
// buildCommonRemoteCompilerOptions): then its in-process backends are
// static for a link that is neither, and for -r follow the module's PIC
// Level flag, whereas clang compiling IR takes its own default (PIC for
// Debian's clang). Both agree for a module without a PIC Level flag (built
// -fno-pic, as the kernel's): such a module's action gets -fno-pic. An
// action whose command already names a relocation model, and a PIC module
// (static in a plain link, PIC in a -r one: the job file does not say
// which), are left as they are; so is one whose module cannot be read as
// bitcode, for its backend to fail on and the pipeline to report.
func pinRelocationModel(actions []*action.Action) {
	for _, a := range actions {
		if namesRelocationModel(a.Args) {
			continue
		}
		path := a.Inputs[0].Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(a.Dir, path)
		}
		// Only a regular file is read here: anything else (a FIFO) is
		// left for the backend to read, or fail on, in its slot.
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if info, err := bitcode.ReadModuleInfo(data); err == nil && !info.PIC {
			insertArg(a, beforeNoUnused(a), "-fno-pic")
		}
	}
}

// Where asInProcess adds an option to a job's command decides its key, not
// what clang does: it adds each where `thindist link` puts it in its own
// command of the same backend (thinlink's plan.command), so that both entry
// points give the backend the same key: -fno-pic where lld puts -fpic,
// before -Wno-unused-command-line-argument (the last of lld 22's common
// options), and -funroll-loops after it.

// noUnused is the index of the -Wno-unused-command-line-argument among a's
// arguments (found), or, should lld not write it, of a's first argument
// naming an input or output: where lld's common options end.
func noUnused(a *action.Action) (i int, found bool) {
	for i, arg := range a.Args {
		if arg.Kind == action.Literal && arg.Text == "-Wno-unused-command-line-argument" {
			return i, true
		}
	}
	for i, arg := range a.Args {
		if arg.Kind != action.Literal {
			return i, false
		}
	}
	return len(a.Args), false
}

// beforeNoUnused and afterNoUnused are where -fno-pic and -funroll-loops go.
func beforeNoUnused(a *action.Action) int {
	i, _ := noUnused(a)
	return i
}

func afterNoUnused(a *action.Action) int {
	i, found := noUnused(a)
	if found {
		i++
	}
	return i
}

// insertArg inserts the literal f into a's arguments at index i.
func insertArg(a *action.Action, i int, f string) {
	a.Args = slices.Insert(a.Args, i, action.Lit(f))
}

// namesRelocationModel reports whether args choose a relocation model.
func namesRelocationModel(args []action.Arg) bool {
	for _, arg := range args {
		if arg.Kind != action.Literal {
			continue
		}
		switch t := strings.ToLower(arg.Text); t {
		case "-fpic", "-fpie", "-fno-pic", "-fno-pie":
			return true
		default:
			if strings.HasPrefix(t, "-mrelocation-model") {
				return true
			}
		}
	}
	return false
}
