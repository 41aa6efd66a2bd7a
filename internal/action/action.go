// Package action defines the unit of work thindist schedules: one ThinLTO
// backend compilation, described as a command with declared inputs and
// outputs and a working directory.
//
// Every job source (an lld DTLTO job file, a `thindist link` thin link, a
// plugin call) produces Actions, and every executor (local processes, the
// action cache, remote execution) consumes them. Command arguments are kept as
// templates that refer to inputs and outputs by position, so an executor can
// place files under other names (a staging directory, stable names inside a
// remote input root) and render the command to match.
package action

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Role says what an input is to the backend compilation.
type Role uint8

const (
	RoleOther  Role = iota
	RoleModule      // the bitcode module being compiled (lld's inputs[0])
	RoleIndex       // its index shard (lld's inputs[1])
	RoleImport      // a module it imports from (lld's inputs[2..])
	RoleCommon      // shared by every job, e.g. a sample profile (common.inputs)
)

func (r Role) String() string {
	switch r {
	case RoleModule:
		return "module"
	case RoleIndex:
		return "index shard"
	case RoleImport:
		return "imported module"
	case RoleCommon:
		return "common input"
	}
	return "input"
}

// Input is a file the command reads.
type Input struct {
	// Path is the file's name as the command and the index shards spell it:
	// relative to the action's Dir, or absolute.
	Path string
	// Source is where the content lives on this machine when it is not at
	// Path (the RFC v0 schema's module map: an archive member recorded in the
	// shards as "lib.a(m.o at 88)" but unpacked to another file). Empty means
	// Path itself. Relative to Dir, or absolute.
	Source string
	Role   Role
}

// Local returns the on-disk file holding the input's content.
func (in Input) Local() string {
	if in.Source != "" {
		return in.Source
	}
	return in.Path
}

// Output is a file the command writes. Outputs[0] is the native object.
type Output struct {
	// Path is where the result must end up, relative to Dir or absolute.
	Path string
}

// RefKind says what an argument refers to.
type RefKind uint8

const (
	Literal RefKind = iota
	InputRef
	OutputRef
)

// Arg is one command-line argument: a literal, or a prefix followed by the
// path of an input or output (as in RFC v0's ["-fthinlto-index=", "inputs", 1]).
type Arg struct {
	Text string // the literal, or the prefix before the referenced path
	Kind RefKind
	// Index is into Inputs or Outputs. An int32, with Kind, fits in a
	// word: every action holds a copy of the common arguments, and a
	// 10,000-job link's Args were a fifth of thindist's heap.
	Index int32
}

// Lit returns a literal argument.
func Lit(s string) Arg { return Arg{Text: s} }

// In returns an argument naming input i after prefix.
func In(prefix string, i int) Arg { return Arg{Text: prefix, Kind: InputRef, Index: int32(i)} }

// Out returns an argument naming output i after prefix.
func Out(prefix string, i int) Arg { return Arg{Text: prefix, Kind: OutputRef, Index: int32(i)} }

// Action is one backend compilation.
type Action struct {
	// ID names the action in messages: the module as the link names it.
	ID string
	// Args is the command; Args[0] is the compiler.
	Args []Arg
	// Dir is the absolute working directory the paths are relative to.
	Dir     string
	Inputs  []Input
	Outputs []Output
	// ModuleSize is the module's size as the job source reported it (the
	// DTLTO plugin's node), 0 if it did not: the scheduler weighs the
	// module's file (schedule.Weigh) and falls back to it where the file
	// shows no size (a FIFO).
	ModuleSize int64
	// What the scheduler knows of the action (its module's size, its
	// expected time, its place in the order) is the scheduler's, beside
	// it (schedule.Estimates, executor.Job.Rank): an Action is made by
	// its job source and not changed after.
}

// Argv renders the command with inputs and outputs named by the given
// functions, so the same action can run in place, in a staging directory or
// inside a remote input root.
func (a *Action) Argv(input func(i int) string, output func(i int) string) []string {
	argv := make([]string, len(a.Args))
	for i, arg := range a.Args {
		switch arg.Kind {
		case InputRef:
			argv[i] = arg.Text + input(int(arg.Index))
		case OutputRef:
			argv[i] = arg.Text + output(int(arg.Index))
		default:
			argv[i] = arg.Text
		}
	}
	return argv
}

// Command renders the command as the job source wrote it: every input and
// output under its own Path.
func (a *Action) Command() []string {
	return a.Argv(func(i int) string { return a.Inputs[i].Path },
		func(i int) string { return a.Outputs[i].Path })
}

// Abs resolves a path of the action against its working directory.
func (a *Action) Abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(a.Dir, p)
}

// Mapped reports whether some input's content lives under another name than
// the one the command uses, so the action cannot run in place.
func (a *Action) Mapped() bool {
	for _, in := range a.Inputs {
		if in.Source != "" && in.Source != in.Path {
			return true
		}
	}
	return false
}

// Validate checks the internal consistency every executor relies on.
func (a *Action) Validate() error {
	if len(a.Args) == 0 || a.Args[0].Kind != Literal || a.Args[0].Text == "" {
		return fmt.Errorf("action %s: no compiler", a.ID)
	}
	if len(a.Outputs) == 0 {
		return fmt.Errorf("action %s: no outputs", a.ID)
	}
	for i, arg := range a.Args {
		switch {
		case arg.Kind == InputRef && (arg.Index < 0 || int(arg.Index) >= len(a.Inputs)):
			return fmt.Errorf("action %s: argument %d refers to input %d of %d", a.ID, i, arg.Index, len(a.Inputs))
		case arg.Kind == OutputRef && (arg.Index < 0 || int(arg.Index) >= len(a.Outputs)):
			return fmt.Errorf("action %s: argument %d refers to output %d of %d", a.ID, i, arg.Index, len(a.Outputs))
		}
	}
	return nil
}

// ShellQuote renders argv as one line a POSIX shell runs as the same command.
func ShellQuote(argv []string) string {
	var b strings.Builder
	for i, s := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quote(s))
	}
	return b.String()
}

func quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("@%+=:,./-_", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ModuleName is a module's path as a user knows it: an archive member is
// "libutil.a(checksum.o)", never lld's "libutil.a(checksum.o at 17600)" in
// index shards or the temporary copy "libutil.a(checksum.o at
// 17600).8.247E.o" lld writes for a DTLTO backend, whose offset and PID
// change from link to link; any other path is unchanged.
//
// The cache key names every module of every shard by this, so it is parsed
// by hand: a regular expression spent a noticeable share of a small link's
// CPU backtracking over its archive members' names (see docs/design.md,
// "Module names parsed by hand").
func ModuleName(path string) string {
	if !strings.Contains(path, " at ") || strings.ContainsRune(path, '\n') {
		return path
	}
	// The member's parenthesis closes at the last ')': what follows is
	// nothing, or the copy's ".<seq>.<HEXPID>.o", which holds none.
	paren := strings.LastIndexByte(path, ')')
	if paren < 0 || !copySuffix(path[paren+1:]) {
		return path
	}
	inner := path[:paren]
	at := strings.LastIndex(inner, " at ")
	if at < 0 || !allIn(inner[at+len(" at "):], "0123456789") {
		return path
	}
	if !strings.Contains(inner[:at], "(") {
		return path
	}
	return inner[:at] + ")" // the member's name ends at its " at "
}

// copySuffix reports whether s is empty or ".<digits>.<hex digits>.o", the
// suffix of lld's copy of an archive member.
func copySuffix(s string) bool {
	if s == "" {
		return true
	}
	rest, ok := strings.CutPrefix(s, ".")
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".o")
	if !ok {
		return false
	}
	seq, pid, ok := strings.Cut(rest, ".")
	return ok && allIn(seq, "0123456789") && allIn(pid, "0123456789abcdefABCDEF")
}

// allIn reports whether s is not empty and every byte of s is in set.
func allIn(s, set string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}
