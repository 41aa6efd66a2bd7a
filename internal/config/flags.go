// Package config holds thindist's settings and reads them from, in
// increasing precedence, their defaults, the default config file
// ($XDG_CONFIG_HOME/thindist/config), a file named by --config, THINDIST_*
// environment variables and command-line flags: a user sets a remote
// service or a cache limit once in a file; build systems pass environment
// more easily than linker flags, so every flag has a variable. Parse
// remembers where each value came from, for `thindist config`.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/observe/redact"
)

// FlagSet is a flag.FlagSet whose every flag also reads an environment
// variable named THINDIST_<FLAG> (upper case, '-' as '_').
type FlagSet struct {
	fs    *flag.FlagSet
	metas map[string]meta
	order []string
	// configFlag names the flag holding a config file, if any.
	configFlag string
	// aliases maps another name of a flag to the flag (-j to jobs,
	// Bazel's --remote_executor to remote).
	aliases map[string]string
	// sources says where each flag set by Parse took its value from.
	sources map[string]string
	// args are the positional arguments Parse found.
	args []string
	// inOrder: the first positional argument ends the flags (a command
	// line to run follows), rather than flags going anywhere.
	inOrder bool
	// inSettings: flags defined now are settings (Config.Register).
	inSettings bool
	// warnings are what Parse ignored in config files, for the user.
	warnings []string
	// others are other commands' sets whose settings s knows (Know).
	others []*FlagSet
}

type meta struct {
	group string
	arg   string // placeholder for the value in help
	def   string // the default as help shows it, if not the value
	// aliases are other long names of the flag (Bazel's spellings).
	aliases []string
	// setting: one of Config's, shared by every command; else the
	// command's own.
	setting bool
	// command: an action of the command (stats --zero, report --json),
	// not a setting: given on the command line only, never read from
	// the environment or a config file.
	command bool
}

// NewFlagSet returns an empty set for the command name.
func NewFlagSet(name string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{fs: fs, metas: map[string]meta{}, aliases: map[string]string{}}
}

// EnvName is the environment variable of a flag.
func EnvName(flagName string) string {
	return "THINDIST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (s *FlagSet) add(name, group, arg string) {
	s.metas[name] = meta{group: group, arg: arg, setting: s.inSettings}
	s.order = append(s.order, name)
}

// Int defines an integer flag of at least min.
func (s *FlagSet) Int(p *int, name, group string, def, min int, usage string) {
	s.IntWant(p, name, group, def, min, fmt.Sprintf("a number of at least %d", min), usage)
}

// IntWant is Int whose errors say want, what it takes (for a minimum
// that stands for something, as -1 does for "the value of --jobs").
func (s *FlagSet) IntWant(p *int, name, group string, def, min int, want, usage string) {
	*p = def
	s.fs.Var(intValue{p: p, min: min, want: want}, name, usage)
	s.add(name, group, "N")
}

// Choice defines a string flag that takes one of choices.
func (s *FlagSet) Choice(p *string, name, group string, choices []string, def, usage string) {
	*p = def
	s.fs.Var(choiceValue{p, choices}, name, usage)
	s.add(name, group, strings.Join(choices, "|"))
}

// Size defines a size flag (ParseSize: 500M, 10G), kept as spelled.
func (s *FlagSet) Size(p *string, name, group, def, usage string) {
	*p = def
	s.fs.Var(sizeValue{p}, name, usage)
	s.add(name, group, "SIZE")
}

// String defines a string flag; arg names the value in help.
func (s *FlagSet) String(p *string, name, group, arg, def, usage string) {
	s.fs.StringVar(p, name, def, usage)
	s.add(name, group, arg)
}

// Bool defines a boolean flag.
func (s *FlagSet) Bool(p *bool, name, group string, def bool, usage string) {
	*p = def
	s.fs.Var(boolValue{p}, name, usage)
	s.add(name, group, "")
}

// Duration defines a duration flag with default def (0 shows no default
// in help).
func (s *FlagSet) Duration(p *time.Duration, name, group, arg string, def time.Duration, usage string) {
	*p = def
	s.fs.Var(durationValue{p}, name, usage)
	s.add(name, group, arg)
}

// Var defines a flag of a custom type (e.g. a repeatable one).
func (s *FlagSet) Var(v flag.Value, name, group, arg, usage string) {
	s.fs.Var(v, name, usage)
	s.add(name, group, arg)
}

// Alias makes short another name of flag long (e.g. -j for --jobs).
func (s *FlagSet) Alias(short, long string) {
	f := s.fs.Lookup(long)
	s.fs.Var(f.Value, short, f.Usage)
	s.aliases[short] = long
	m := s.metas[long]
	if len(short) == 1 {
		m.arg = m.arg + "|-" + short
	} else {
		m.aliases = append(m.aliases, short)
	}
	s.metas[long] = m
}

// AliasValue makes name another spelling of flag long whose value v sets
// differently (Bazel's --remote_cache sets --remote and implies
// --remote-cache-only).
func (s *FlagSet) AliasValue(name, long string, v flag.Value) {
	s.fs.Var(v, name, s.fs.Lookup(long).Usage)
	s.aliases[name] = long
	m := s.metas[long]
	m.aliases = append(m.aliases, name)
	s.metas[long] = m
}

// CommandOnly marks flag name as an action of the command, not a setting:
// Parse takes it from the command line only (no THINDIST_ variable, no
// config file line), so an environment cannot zero statistics or change
// an output format behind a user's back.
func (s *FlagSet) CommandOnly(name string) {
	m := s.metas[name]
	m.command = true
	s.metas[name] = m
}

// InOrder makes the first positional argument end the flags: what follows
// it is a command line of its own (thindist link -- clang ...). By default
// flags go anywhere, before or after positional arguments; "--" ends them
// either way.
func (s *FlagSet) InOrder() { s.inOrder = true }

// Know makes the settings of another command's set known to s (thindist
// link's --in-process-below to the DTLTO entry point and `thindist
// stats`): a config-file line or a THINDIST_* variable for one is checked
// as other checks it and otherwise left to that command, and the flag on
// s's command line is an error naming the command. s's own flags of the
// same name win.
func (s *FlagSet) Know(other *FlagSet) { s.others = append(s.others, other) }

// other is the set of Know whose setting name is, if s has no flag of
// that name.
func (s *FlagSet) other(name string) *FlagSet {
	if s.fs.Lookup(name) != nil {
		return nil
	}
	for _, o := range s.others {
		if f := o.fs.Lookup(name); f != nil && !o.metas[o.canonical(f.Name)].command {
			return o
		}
	}
	return nil
}

// Warnings are what Parse ignored in config files (unknown settings, bad
// values), each naming the file and line; the caller shows them.
func (s *FlagSet) Warnings() []string { return s.warnings }

// implier is a value whose Set also sets other flags.
type implier interface{ Implies() []string }

// setSource records where name (and whatever its value implies) came from.
func (s *FlagSet) setSource(f *flag.Flag, source string) {
	s.sources[s.canonical(f.Name)] = source
	if im, ok := f.Value.(implier); ok {
		for _, n := range im.Implies() {
			if s.sources[n] == "" {
				s.sources[n] = source
			}
		}
	}
}

// DefaultText sets how help describes a flag's default (e.g. "the number of
// CPUs" rather than this machine's count).
func (s *FlagSet) DefaultText(name, text string) {
	m := s.metas[name]
	m.def = text
	s.metas[name] = m
}

// Parse reads args (flags and positional arguments in any order, see
// InOrder) and fills every setting not given on the command line from its
// environment variable, then from the config file named by the config
// flag, then from the default config file (DefaultConfigFile), in that
// order of precedence. getenv is os.Getenv in production. Every value goes
// through its setting's own check (values.go), whatever its source. Errors
// name the flag or the variable as the user spelled it (--jobs,
// THINDIST_JOBS) and say what is expected; an unknown flag gets the
// nearest known one as a suggestion. What is wrong in a config file does
// not stop the command: Warnings says what was ignored, by file and line.
// The settings of the sets of Know are read and checked too, and left to
// their command. Parse clears Warnings; CheckEnviron adds to them after.
func (s *FlagSet) Parse(args []string, getenv func(string) string) error {
	s.sources = map[string]string{}
	s.warnings = nil
	if err := s.parseArgs(args); err != nil {
		return err
	}
	s.fs.Visit(func(f *flag.Flag) { s.setSource(f, "flag --"+f.Name) })
	for _, name := range s.order {
		if s.sources[name] != "" || s.metas[name].command {
			continue
		}
		if v := getenv(EnvName(name)); v != "" {
			if err := s.setEnv(name, v); err != nil {
				return err
			}
			s.sources[name] = "environment " + EnvName(name)
		}
	}
	// Other commands' settings: checked here too, used there.
	for _, o := range s.others {
		for _, name := range o.order {
			if v := getenv(EnvName(name)); v != "" && s.other(name) == o {
				if err := o.setEnv(name, v); err != nil {
					return err
				}
			}
		}
	}
	if s.configFlag == "" {
		return nil
	}
	// The file named explicitly wins over the default one.
	if path := s.fs.Lookup(s.configFlag).Value.String(); path != "" {
		if err := s.applyFile(path, false); err != nil {
			return err
		}
	}
	if path := DefaultConfigFile(getenv); path != "" {
		if err := s.applyFile(path, true); err != nil {
			return err
		}
	}
	return nil
}

// setEnv sets flag name from the value v of its variable (a repeatable
// flag takes several values from one variable).
func (s *FlagSet) setEnv(name, v string) error {
	var err error
	if l, ok := s.fs.Lookup(name).Value.(listValue); ok {
		err = l.SetList(v)
	} else {
		err = s.fs.Set(name, v)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", EnvName(name), err)
	}
	return nil
}

// FirstArg returns the index in args of the first positional argument
// after s's flags and their values (as InOrder reads them), or -1 when
// there is none, "--" comes before it, or a flag before it is not one of
// s's or has a bad value (Parse then says so). It reads no environment
// and no file: thindist's main looks this way for a command after the
// settings (thindist --cache-dir D stats).
func (s *FlagSet) FirstArg(args []string) int {
	if err := s.fs.Parse(args); err != nil {
		return -1
	}
	rest := s.fs.Args()
	used := len(args) - len(rest)
	if len(rest) == 0 || used > 0 && args[used-1] == "--" {
		return -1
	}
	return used
}

// parseArgs parses the command line into the flags and s.args.
func (s *FlagSet) parseArgs(args []string) error {
	s.args = nil
	for {
		if err := s.fs.Parse(args); err != nil {
			return s.flagError(err)
		}
		rest := s.fs.Args()
		if len(rest) == 0 {
			return nil
		}
		// The flag package stops at "--" (dropping it) or at the first
		// positional argument.
		used := len(args) - len(rest)
		if s.inOrder || used > 0 && args[used-1] == "--" {
			s.args = append(s.args, rest...)
			return nil
		}
		s.args = append(s.args, rest[0])
		args = rest[1:]
	}
}

// applyFile sets every setting that path sets and no source of higher
// precedence has set. A missing file is an error unless optional; an
// unknown setting or a bad value is a warning (the line is ignored), so
// that a typo in a file every link reads does not fail every link.
func (s *FlagSet) applyFile(path string, optional bool) error {
	kvs, err := readConfigFile(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	source := "file " + path
	for _, kv := range kvs {
		f := s.fs.Lookup(kv.key)
		if f != nil && s.metas[s.canonical(f.Name)].command {
			s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: %q is an option of the command, not a setting: give it on the command line; line ignored",
				path, kv.line, kv.key))
			continue
		}
		if o := s.other(kv.key); f == nil && o != nil {
			// Another command's setting: checked, and left to it.
			if err := o.fs.Set(kv.key, kv.value); err != nil {
				s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: %s: %v; line ignored", path, kv.line, kv.key, err))
			}
			continue
		}
		if f == nil || kv.key == s.configFlag {
			s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: unknown setting %q%s (the settings are listed by 'thindist help settings', without dashes); line ignored",
				path, kv.line, kv.key, s.suggest(kv.key, "")))
			continue
		}
		name := s.canonical(f.Name)
		if src := s.sources[name]; src != "" && src != source {
			continue
		}
		if err := s.fs.Set(f.Name, kv.value); err != nil {
			s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: %s: %v; line ignored", path, kv.line, kv.key, err))
			continue
		}
		s.setSource(f, source)
	}
	return nil
}

// canonical is the flag an alias stands for (the name itself otherwise).
func (s *FlagSet) canonical(name string) string {
	if long, ok := s.aliases[name]; ok {
		return long
	}
	return name
}

// DefaultConfigFile is $XDG_CONFIG_HOME/thindist/config, else
// ~/.config/thindist/config: read by every command when it exists, below
// the environment and the command line.
func DefaultConfigFile(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "thindist", "config")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "thindist", "config")
	}
	return ""
}

// Source says where flag name took its value from after Parse: "default",
// "file PATH", "environment THINDIST_X" or "flag --x".
func (s *FlagSet) Source(name string) string {
	if src := s.sources[s.canonical(name)]; src != "" {
		return src
	}
	return "default"
}

// Setting is one flag's effective value and where it came from.
type Setting struct {
	Name  string
	Value string
	// Source is "default", "file PATH", "environment THINDIST_X" or
	// "flag --x".
	Source string
	// Secret: the value may hold credentials (it is redacted in Value).
	Secret bool
	// DefaultText is what the value means when it is the flag's default
	// and that is a placeholder (remote-local-jobs -1 is "--jobs").
	DefaultText string
}

// Settings lists every flag's effective value after Parse, in definition
// order. Values of secret flags are redacted.
func (s *FlagSet) Settings() []Setting {
	var out []Setting
	for _, name := range s.order {
		m := s.metas[name]
		if m.command {
			continue
		}
		f := s.fs.Lookup(name)
		v := f.Value
		secret := redact.IsCredentialFlag(name)
		st := Setting{Name: name, Value: v.String(), Source: s.Source(name), Secret: secret}
		if st.Value == f.DefValue {
			st.DefaultText = m.def
		}
		if secret {
			if r, ok := v.(redacter); ok {
				st.Value = r.Redacted()
			} else if st.Value != "" {
				st.Value = redact.Mask
			}
		}
		out = append(out, st)
	}
	return out
}

// redacter is a value that can show itself without its secrets.
type redacter interface{ Redacted() string }

// flagError rewrites the flag package's messages to name the flag with
// two dashes and say what is expected (the reasons come from the values'
// own Set methods), or which flag an unknown one likely meant.
func (s *FlagSet) flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		if o := s.other(name); o != nil {
			return fmt.Errorf("%s is a setting of '%s', not of '%s'", dashed(name), o.fs.Name(), s.fs.Name())
		}
		return fmt.Errorf("unknown flag %s%s", dashed(name), s.suggest(name, "--"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("%s: expected a value", dashed(name))
	}
	if rest, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return fmt.Errorf("bad flag syntax %q: use --name=value or --name value", rest)
	}
	// invalid value "x" for flag -name: reason
	// invalid boolean value "x" for -name: reason
	for _, sep := range []string{" for flag -", " for -"} {
		if i := strings.Index(msg, sep); i >= 0 && strings.HasPrefix(msg, "invalid ") {
			if name, reason, ok := strings.Cut(msg[i+len(sep):], ": "); ok {
				return fmt.Errorf("%s: %s", dashed(name), reason)
			}
		}
	}
	return err
}

// dashed spells a flag as on the command line: -j, --jobs.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// listValue is a repeatable flag that takes several values from one
// environment variable.
type listValue interface {
	flag.Value
	SetList(string) error
}

// Args returns the positional arguments.
func (s *FlagSet) Args() []string { return s.args }

// PrintDefaults writes every flag, grouped, with its variable and default
// (not those of the sets of Know: their own command's help shows them).
func (s *FlagSet) PrintDefaults(w io.Writer) { s.print(w, func(meta) bool { return true }) }

// PrintOwn writes the command's own flags (those that are not settings
// every command shares), grouped as PrintDefaults does.
func (s *FlagSet) PrintOwn(w io.Writer) { s.print(w, func(m meta) bool { return !m.setting }) }

func (s *FlagSet) print(w io.Writer, keep func(meta) bool) {
	groups := map[string][]string{}
	var names []string
	for _, name := range s.order {
		if !keep(s.metas[name]) {
			continue
		}
		g := s.metas[name].group
		if _, ok := groups[g]; !ok {
			names = append(names, g)
		}
		groups[g] = append(groups[g], name)
	}
	for _, g := range names {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, name := range groups[g] {
			f := s.fs.Lookup(name)
			m := s.metas[name]
			head := "  --" + name
			arg, short := m.arg, ""
			if i := strings.Index(arg, "|-"); i >= 0 {
				arg, short = arg[:i], arg[i+1:]
			}
			if short != "" {
				head = "  " + short + ", --" + name
			}
			if arg != "" {
				head += " " + arg
			}
			fmt.Fprintf(w, "%s\n", head)
			for _, line := range strings.Split(f.Usage, "\n") {
				fmt.Fprintf(w, "        %s\n", line)
			}
			extra := "env " + EnvName(name)
			if m.command {
				extra = "command line only"
			}
			for _, a := range m.aliases {
				extra += "; also --" + a
			}
			switch {
			case m.def != "":
				extra += "; default " + m.def
			case f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0s":
				extra += "; default " + f.DefValue
			}
			fmt.Fprintf(w, "        (%s)\n", extra)
		}
	}
}

// Names lists the flags defined, sorted (for tests that check the help).
func (s *FlagSet) Names() []string {
	n := append([]string(nil), s.order...)
	sort.Strings(n)
	return n
}
