package thinlink

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CompDB is a compilation database (compile_commands.json), indexed by the
// object file each command writes.
type CompDB struct {
	byOutput map[string]*compileCommand // absolute, cleaned output path
	byBase   map[string][]*compileCommand
	byReal   map[string]*compileCommand // output path with symbolic links resolved, built on first need
}

type compileCommand struct {
	dir    string
	args   []string
	output string
}

type compdbEntry struct {
	Directory string   `json:"directory"`
	File      string   `json:"file"`
	Arguments []string `json:"arguments"`
	Command   string   `json:"command"`
	Output    string   `json:"output"`
}

// LoadCompDB reads a compilation database. Entries whose object file cannot
// be determined (no "output" and no -o) are ignored: they cannot be matched
// with a module.
func LoadCompDB(path string) (*CompDB, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []compdbEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	db := &CompDB{byOutput: map[string]*compileCommand{}, byBase: map[string][]*compileCommand{}}
	base := filepath.Dir(path)
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	for i, e := range entries {
		args := e.Arguments
		if len(args) == 0 {
			args = splitShell(e.Command)
		}
		if len(args) == 0 {
			return nil, fmt.Errorf("%s: entry %d has neither \"arguments\" nor \"command\"", path, i)
		}
		dir := e.Directory
		if dir == "" {
			dir = base
		} else if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
		out := e.Output
		if out == "" {
			for j := 1; j < len(args); j++ {
				if args[j] == "-o" && j+1 < len(args) {
					out = args[j+1]
				} else if strings.HasPrefix(args[j], "-o") && len(args[j]) > 2 {
					out = args[j][2:]
				}
			}
		}
		if out == "" {
			continue
		}
		if !filepath.IsAbs(out) {
			out = filepath.Join(dir, out)
		}
		out = filepath.Clean(out)
		cc := &compileCommand{dir: dir, args: args, output: out}
		db.byOutput[out] = cc
		db.byBase[filepath.Base(out)] = append(db.byBase[filepath.Base(out)], cc)
	}
	return db, nil
}

// lookup finds the compile command that wrote the object at abs (absolute),
// or, for a member of a regular archive (abs == ""), the only command whose
// object has the member's name.
func (db *CompDB) lookup(abs, memberName string) *compileCommand {
	if db == nil {
		return nil
	}
	if abs != "" {
		if cc := db.byOutput[filepath.Clean(abs)]; cc != nil {
			return cc
		}
		// The same file through a symbolic link.
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil
		}
		if db.byReal == nil {
			db.byReal = map[string]*compileCommand{}
			for out, cc := range db.byOutput {
				if r, err := filepath.EvalSymlinks(out); err == nil {
					db.byReal[r] = cc
				}
			}
		}
		return db.byReal[real]
	}
	if c := db.byBase[filepath.Base(memberName)]; len(c) == 1 {
		return c[0]
	}
	return nil
}

// BackendFlags returns the options of a compile command that still mean
// something to a ThinLTO backend compiling that module's IR: optimisation
// and code generation. What is removed, and why:
//
//   - the compiler itself, -c, -S, -E, -o FILE, the source file(s), -x LANG:
//     thindist writes its own backend command (`-c -x ir MODULE
//     -fthinlto-index=SHARD -o NATIVE`), and the link's compiler runs every
//     backend, since the bitcode must be read by the LLVM that wrote the index;
//   - -flto, -flto=*, -fno-lto, -ffat-lto-objects, -funified-lto,
//     -fsplit-lto-unit, -fthin-link-bitcode=, -fthinlto-index=, -emit-llvm:
//     on a backend they would make clang write bitcode again or read another
//     index;
//   - preprocessor options (-D, -U, -I, -isystem, -iquote, -idirafter,
//     -include, -imacros, -iprefix, -iwithprefix, -isysroot, --sysroot,
//     -nostdinc*, -Wp,..., -P, -C, -undef): the source was preprocessed
//     before the bitcode existed;
//   - dependency-file options (-M, -MM, -MD, -MMD, -MF, -MT, -MQ, -MP, -MG,
//     -MJ, -dependency-file): they would write .d files for a compilation
//     that has no headers, beside outputs thindist does not declare;
//   - language and diagnostic options (-std=, -ansi, -pedantic*, -W... other
//     than -Wa,..., -w, -ferror-limit=, -fdiagnostics-*, -f[no-]color-
//     diagnostics): they apply to source; -Werror would only turn the
//     backend's "argument unused" notes into errors;
//   - precompiled headers and modules (-include-pch, -fmodules*, -fmodule-*,
//     -fpch-*): source only;
//   - profile instrumentation and use (-fprofile-generate*, -fprofile-instr-
//     generate*, -fprofile-use*, -fprofile-instr-use*, -fcoverage-mapping,
//     -fprofile-arcs, -ftest-coverage): the pre-link compile already
//     instrumented or annotated the IR, and in-process ThinLTO does not apply
//     them again (-fprofile-sample-use is kept: the sample loader runs again
//     after importing);
//   - -gsplit-dwarf: it would write a .dwo that is not a declared output.
//
// Everything else (-O levels, -f and -m code generation options such as
// -fno-unroll-loops, -fno-vectorize, -falign-loops=, -march=, -fPIC, -g,
// -mllvm ..., -Xclang ...) is kept.
func frontendFiltered(args []string) []string {
	var out []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		skipNext := func() { i++ }
		switch {
		// Separate-value options removed with their value.
		case a == "-o" || a == "-x" || a == "-D" || a == "-U" || a == "-I" ||
			a == "-isystem" || a == "-iquote" || a == "-idirafter" || a == "-include" ||
			a == "-imacros" || a == "-iprefix" || a == "-iwithprefix" || a == "-iwithprefixbefore" ||
			a == "-isysroot" || a == "--sysroot" || a == "-MF" || a == "-MT" || a == "-MQ" ||
			a == "-MJ" || a == "-dependency-file" || a == "-include-pch" || a == "-Xpreprocessor":
			skipNext()
		// Separate-value options kept with their value.
		case a == "-mllvm" || a == "-Xclang" || a == "-target" || a == "-arch" || a == "-Xassembler":
			out = append(out, a)
			if i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case a == "-c" || a == "-S" || a == "-E" || a == "-emit-llvm" || a == "-P" || a == "-C" ||
			a == "-undef" || a == "-ansi" || a == "-w" || a == "-M" || a == "-MM" || a == "-MD" ||
			a == "-MMD" || a == "-MP" || a == "-MG" || a == "-pipe" || a == "-gsplit-dwarf" ||
			a == "-fsyntax-only" || a == "-ftest-coverage" || a == "-fprofile-arcs" ||
			a == "-fcoverage-mapping" || a == "-fno-coverage-mapping":
		case strings.HasPrefix(a, "-o"), strings.HasPrefix(a, "-x"),
			strings.HasPrefix(a, "-D"), strings.HasPrefix(a, "-U"), strings.HasPrefix(a, "-I"),
			strings.HasPrefix(a, "-isystem"), strings.HasPrefix(a, "-iquote"),
			strings.HasPrefix(a, "-idirafter"), strings.HasPrefix(a, "--sysroot="),
			strings.HasPrefix(a, "-isysroot"), strings.HasPrefix(a, "-nostdinc"),
			strings.HasPrefix(a, "-Wp,"), strings.HasPrefix(a, "-std="), strings.HasPrefix(a, "--std="),
			strings.HasPrefix(a, "-pedantic"), strings.HasPrefix(a, "-ferror-limit"),
			strings.HasPrefix(a, "-fdiagnostics-"), a == "-fcolor-diagnostics", a == "-fno-color-diagnostics",
			strings.HasPrefix(a, "-fmodules"), strings.HasPrefix(a, "-fmodule-"),
			strings.HasPrefix(a, "-fno-modules"), strings.HasPrefix(a, "-fpch-"),
			strings.HasPrefix(a, "-MF"), strings.HasPrefix(a, "-MT"), strings.HasPrefix(a, "-MQ"),
			strings.HasPrefix(a, "-MJ"),
			a == "-flto", strings.HasPrefix(a, "-flto="), a == "-fno-lto", strings.HasPrefix(a, "-flto-"),
			a == "-ffat-lto-objects", a == "-fno-fat-lto-objects", a == "-funified-lto", a == "-fno-unified-lto",
			a == "-fsplit-lto-unit", a == "-fno-split-lto-unit",
			strings.HasPrefix(a, "-fthin-link-bitcode="), strings.HasPrefix(a, "-fthinlto-index="),
			strings.HasPrefix(a, "-fprofile-generate"), strings.HasPrefix(a, "-fprofile-instr-generate"),
			strings.HasPrefix(a, "-fcs-profile-generate"),
			strings.HasPrefix(a, "-fprofile-use"), strings.HasPrefix(a, "-fprofile-instr-use"):
		case strings.HasPrefix(a, "-W") && !strings.HasPrefix(a, "-Wa,"):
		case !strings.HasPrefix(a, "-") && a != "":
			// A source file (or another input): not the backend's.
		default:
			out = append(out, a)
		}
	}
	return out
}

// splitShell splits a "command" string of a compilation database with POSIX
// shell quoting (single quotes, double quotes, backslash).
func splitShell(s string) []string {
	var out []string
	var tok strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, tok.String())
				tok.Reset()
				in = false
			}
		case c == '\\' && i+1 < len(s):
			i++
			tok.WriteByte(s[i])
			in = true
		case c == '\'':
			in = true
			for i++; i < len(s) && s[i] != '\''; i++ {
				tok.WriteByte(s[i])
			}
		case c == '"':
			in = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				tok.WriteByte(s[i])
			}
		default:
			tok.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, tok.String())
	}
	return out
}
