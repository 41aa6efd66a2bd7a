// Package config holds thindist's settings and reads them from command-line
// flags and THINDIST_* environment variables: build systems pass environment
// more easily than linker flags, so every flag has a variable, and a flag on
// the command line wins over its variable.
package config

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// FlagSet is a flag.FlagSet whose every flag also reads an environment
// variable named THINDIST_<FLAG> (upper case, '-' as '_').
type FlagSet struct {
	fs    *flag.FlagSet
	metas map[string]meta
	order []string
	// configFlag names the flag holding a config file, if any.
	configFlag string
}

type meta struct {
	group string
	arg   string // placeholder for the value in help
	def   string // the default as help shows it, if not the value
}

// NewFlagSet returns an empty set for the command name.
func NewFlagSet(name string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{fs: fs, metas: map[string]meta{}}
}

// EnvName is the environment variable of a flag.
func EnvName(flagName string) string {
	return "THINDIST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (s *FlagSet) add(name, group, arg string) {
	s.metas[name] = meta{group: group, arg: arg}
	s.order = append(s.order, name)
}

// Int defines an integer flag.
func (s *FlagSet) Int(p *int, name, group string, def int, usage string) {
	s.fs.IntVar(p, name, def, usage)
	s.add(name, group, "N")
}

// String defines a string flag; arg names the value in help.
func (s *FlagSet) String(p *string, name, group, arg, def, usage string) {
	s.fs.StringVar(p, name, def, usage)
	s.add(name, group, arg)
}

// Bool defines a boolean flag.
func (s *FlagSet) Bool(p *bool, name, group string, def bool, usage string) {
	s.fs.BoolVar(p, name, def, usage)
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
	m := s.metas[long]
	m.arg = m.arg + "|-" + short
	s.metas[long] = m
}

// DefaultText sets how help describes a flag's default (e.g. "the number of
// CPUs" rather than this machine's count).
func (s *FlagSet) DefaultText(name, text string) {
	m := s.metas[name]
	m.def = text
	s.metas[name] = m
}

// Parse reads args (flags, then positional arguments) and fills every flag
// not given on the command line from its environment variable. getenv is
// os.Getenv in production.
func (s *FlagSet) Parse(args []string, getenv func(string) string) error {
	if err := s.fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fromEnv := map[string]bool{}
	for _, name := range s.order {
		if given[name] {
			continue
		}
		if v := getenv(EnvName(name)); v != "" {
			var err error
			if l, ok := s.fs.Lookup(name).Value.(listValue); ok {
				err = l.SetList(v)
			} else {
				err = s.fs.Set(name, v)
			}
			if err != nil {
				return fmt.Errorf("%s=%q: %v", EnvName(name), v, err)
			}
			fromEnv[name] = true
		}
	}
	if s.configFlag == "" {
		return nil
	}
	path := s.fs.Lookup(s.configFlag).Value.String()
	if path == "" {
		return nil
	}
	kvs, err := readConfigFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	for _, kv := range kvs {
		f := s.fs.Lookup(kv[0])
		if f == nil || kv[0] == s.configFlag {
			return fmt.Errorf("config file %s: unknown setting %q", path, kv[0])
		}
		if given[f.Name] || fromEnv[f.Name] {
			continue
		}
		if err := s.fs.Set(f.Name, kv[1]); err != nil {
			return fmt.Errorf("config file %s: %s = %q: %v", path, kv[0], kv[1], err)
		}
	}
	return nil
}

// listValue is a repeatable flag that takes several values from one
// environment variable.
type listValue interface {
	flag.Value
	SetList(string) error
}

// Args returns the positional arguments.
func (s *FlagSet) Args() []string { return s.fs.Args() }

// PrintDefaults writes every flag, grouped, with its variable and default.
func (s *FlagSet) PrintDefaults(w io.Writer) {
	groups := map[string][]string{}
	var names []string
	for _, name := range s.order {
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
