package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
)

// node is a dtltoBitcodeNodeTy copied into Go memory.
type node struct {
	ModuleID         string
	ModulePath       string
	ModuleSize       int64
	SummaryIndexPath string
	NativeObjectPath string
	Imports          []string
	TargetTriple     string
	TaskNumber       uint64
}

// optionPrefix marks the Argv entries that are thindist's own options
// (--thindist-jobs=8 is --jobs=8); they are removed before Argv reaches
// clang.
const optionPrefix = "--thindist-"

// settings is what the plugin takes from Argv and the environment.
type settings struct {
	cfg config.Config
	// compiler is the clang that runs the backends.
	compiler string
	// opts are the clang options of Argv, without thindist's own.
	opts []string
}

// parseArgv splits Argv into thindist's options and clang's, and reads the
// configuration from the former and the THINDIST_* environment (an option
// wins over its variable), exactly as the command line does.
func parseArgv(argv []string, getenv func(string) string, linker string) (*settings, error) {
	s := &settings{}
	fs := config.NewFlagSet("thindist")
	s.cfg.Register(fs)
	var compiler string
	fs.String(&compiler, "compiler", "Plugin", "PATH", "",
		"the clang that compiles the backends (default: Argv[0] when it is not an option,\n"+
			"else clang next to the linker, else clang in PATH)")
	var ours []string
	for _, a := range argv {
		if strings.HasPrefix(a, optionPrefix) {
			ours = append(ours, "--"+strings.TrimPrefix(a, optionPrefix))
			continue
		}
		s.opts = append(s.opts, a)
	}
	if err := fs.Parse(ours, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			err = errors.New("help is not available here; see plugin/README.md")
		}
		return nil, fmt.Errorf("the thindist options %s: %v", strings.Join(restore(ours), " "), err)
	}
	// A config file's typos are ignored, not fatal: say what was ignored.
	for _, w := range fs.Warnings() {
		fmt.Fprintf(os.Stderr, "thindist: warning: %s\n", w)
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, fmt.Errorf("unexpected thindist option argument %q (write %sFLAG=VALUE)", rest[0], optionPrefix)
	}
	if err := s.cfg.Check(); err != nil {
		return nil, err
	}
	// Argv may start with the compiler, as lld's job file does: a first
	// entry that is not an option cannot be anything else.
	if len(s.opts) > 0 && !strings.HasPrefix(s.opts[0], "-") {
		if compiler == "" {
			compiler = s.opts[0]
		}
		s.opts = s.opts[1:]
	}
	if compiler == "" {
		c, err := defaultCompiler(linker)
		if err != nil {
			return nil, err
		}
		compiler = c
	}
	s.compiler = compiler
	return s, nil
}

func restore(ours []string) []string {
	out := make([]string, len(ours))
	for i, o := range ours {
		out[i] = optionPrefix + strings.TrimPrefix(o, "--")
	}
	return out
}

// defaultCompiler is the clang installed beside the linker (the executable
// that loaded the plugin), as with a toolchain's bin directory, else the
// clang in PATH.
func defaultCompiler(linker string) (string, error) {
	if linker != "" {
		c := filepath.Join(filepath.Dir(linker), "clang")
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	if c, err := exec.LookPath("clang"); err == nil {
		return c, nil
	}
	return "", fmt.Errorf("no compiler for the backends: there is no clang beside the linker (%s) nor in PATH; "+
		"set THINDIST_COMPILER=/path/to/clang or pass %scompiler=/path/to/clang", linker, optionPrefix)
}

// buildActions turns the nodes into backend actions, the same ones the DTLTO
// job file path produces:
//
//	<compiler> <opts...> -c -x ir -fthinlto-index=<shard> -target <triple> -o <object> <module>
//
// run in dir (the linker's working directory, which relative paths in the
// nodes and in the shards are relative to).
func buildActions(dir string, s *settings, nodes []node) ([]*action.Action, error) {
	// Imports name modules by their identifier, which for an archive member
	// is no file ("lib.a(m.o at 88)"); when that module is also compiled in
	// this call its node says where the content is.
	byID := map[string]string{}
	for _, n := range nodes {
		if n.ModulePath != "" {
			byID[n.ModuleID] = n.ModulePath
		}
	}
	actions := make([]*action.Action, 0, len(nodes))
	for i, n := range nodes {
		a, err := nodeAction(dir, s, n, byID)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s): %v", i, n.ModuleID, err)
		}
		actions = append(actions, a)
	}
	return actions, nil
}

func nodeAction(dir string, s *settings, n node, byID map[string]string) (*action.Action, error) {
	switch {
	case n.ModuleID == "":
		return nil, errors.New("the node has no ModuleId")
	case n.SummaryIndexPath == "":
		return nil, errors.New("the node has no SummaryIndexPath")
	case n.NativeObjectPath == "":
		return nil, errors.New("the node has no NativeObjectPath")
	}
	a := &action.Action{ID: n.ModuleID, Dir: dir, ModuleSize: n.ModuleSize}
	mod := action.Input{Path: n.ModuleID, Role: action.RoleModule}
	if n.ModulePath != "" && !samePath(dir, n.ModuleID, n.ModulePath) {
		// The shard records the module as ModuleId and the backend must be
		// given that name (else it writes an object with no symbols); the
		// executor materialises a link under it.
		mod.Source = n.ModulePath
	}
	a.Inputs = append(a.Inputs, mod, action.Input{Path: n.SummaryIndexPath, Role: action.RoleIndex})
	seen := map[string]bool{n.ModuleID: true}
	for k, imp := range n.Imports {
		if imp == "" {
			return nil, fmt.Errorf("ImportsList[%d] is an empty path", k)
		}
		if seen[imp] {
			continue
		}
		seen[imp] = true
		in := action.Input{Path: imp, Role: action.RoleImport}
		if src, ok := byID[imp]; ok && !samePath(dir, imp, src) {
			in.Source = src
		}
		a.Inputs = append(a.Inputs, in)
	}
	if a.Mapped() && filepath.IsAbs(a.Inputs[1].Path) {
		// A mapped action runs in an input root where only relative names
		// can be placed; the shard is named by the command alone, so any
		// spelling of it will do.
		if rel, err := filepath.Rel(dir, a.Inputs[1].Path); err == nil {
			a.Inputs[1].Path = rel
		}
	}
	a.Outputs = []action.Output{{Path: n.NativeObjectPath}}

	a.Args = append(a.Args, action.Lit(s.compiler))
	for _, o := range s.opts {
		a.Args = append(a.Args, action.Lit(o))
	}
	a.Args = append(a.Args, action.Lit("-c"), action.Lit("-x"), action.Lit("ir"), action.In("-fthinlto-index=", 1))
	if n.TargetTriple != "" {
		a.Args = append(a.Args, action.Lit("-target"), action.Lit(n.TargetTriple))
	}
	a.Args = append(a.Args, action.Lit("-o"), action.Out("", 0), action.In("", 0))
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// samePath reports whether the link's name for a file (relative to dir) and
// a path on disk are the same file.
func samePath(dir, name, path string) bool {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(dir, p)
	}
	if abs(name) == abs(path) {
		return true
	}
	a, err1 := os.Stat(abs(name))
	b, err2 := os.Stat(abs(path))
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}
