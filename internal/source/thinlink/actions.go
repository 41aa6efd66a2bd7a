// Step 3: one backend action per module the link uses.

package thinlink

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
)

// imports are the modules m imports from: the module table of its shard
// without m itself. That table is the set lld's
// --thinlto-emit-imports-files would write (both come from the same
// module-to-summaries map of the thin link), in the shard's order.
func (p *plan) imports(m *Module, shard string) ([]string, error) {
	data, err := os.ReadFile(p.abs(shard))
	if err != nil {
		return nil, fmt.Errorf("reading the index shard lld wrote: %v", err)
	}
	table, err := bitcode.ModuleTable(data)
	if err != nil {
		return nil, fmt.Errorf("reading the index shard %s: %v", shard, err)
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
		return nil, fmt.Errorf("the index shard %s does not name the module %q itself", shard, m.Key)
	}
	return imports, nil
}

// backend is what the thin link decided for one module: the index shard
// lld wrote for it and the modules it imports from (as lld names them).
// Where its native object goes is the module's Native.
type backend struct {
	m       *Module
	shard   string
	imports []string
}

// separateBackends are the backends of the separate thin link's modules:
// their shards under the index prefix, their objects in the work directory.
func (p *plan) separateBackends(linked []*Module) ([]backend, error) {
	var bs []backend
	for n, m := range linked {
		m.Native = filepath.Join(p.work, "native", fmt.Sprintf("%d.%s.o", n, filepath.Base(m.KeepName)))
		if err := os.MkdirAll(filepath.Dir(p.abs(m.Native)), 0o755); err != nil {
			return nil, err
		}
		imports, err := p.imports(m, p.shard(m))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m.Display, err)
		}
		bs = append(bs, backend{m: m, shard: p.shard(m), imports: imports})
	}
	return bs, nil
}

// actions builds one backend action per backend.
func (p *plan) actions(ctx context.Context, bs []backend) ([]*action.Action, error) {
	compiler, err := p.compiler()
	if err != nil {
		return nil, err
	}
	var flags linkFlags
	flags.lld, flags.extra, flags.profiles = p.line.backendFlags()
	if note := p.line.codegenNote(flags.lld[0]); note != "" {
		fmt.Fprintf(p.opts.Stderr, "thindist: note: %s\n", note)
	}
	if flags.extra, err = p.knownMllvm(ctx, compiler, flags.extra); err != nil {
		return nil, err
	}
	if p.opts.SectionsAsCompiled {
		flags.lld = withoutForcedSections(flags.lld)
		if p.line.gcSections() {
			fmt.Fprintf(p.opts.Stderr, "thindist: note: --sections-as-compiled: modules compiled without "+
				"-ffunction-sections -fdata-sections keep their code and data in a few large sections, "+
				"which --gc-sections can only keep or drop whole, so the output keeps more than in-process ThinLTO's\n")
		}
	}
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
	for _, b := range bs {
		m := b.m
		a := &action.Action{ID: m.Display, Dir: p.opts.Dir}
		a.Inputs = []action.Input{{Path: m.Key, Role: action.RoleModule}, {Path: b.shard, Role: action.RoleIndex}}
		for _, imp := range b.imports {
			im := p.modules[imp]
			if im == nil || !im.linked {
				return nil, fmt.Errorf("%s imports from %q, which is not a module of this link under that path", m.Display, imp)
			}
			a.Inputs = append(a.Inputs, action.Input{Path: imp, Role: action.RoleImport})
		}
		matched, err := p.command(a, m, compiler, flags)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m.Display, err)
		}
		if !matched && p.opts.CompDB != nil {
			unmatched = append(unmatched, m.Display)
		}
		a.Outputs = []action.Output{{Path: m.Native}}
		if err := a.Validate(); err != nil {
			return nil, err
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// linkFlags are the backend options the link line gives every module
// (linkLine.backendFlags).
type linkFlags struct{ lld, extra, profiles []string }

// command sets a's arguments, the backend command of module m: lld's DTLTO
// command first, in its order, so that both entry points give the same
// backend the same command (but for the compiler's spelling: the link's
// driver here, clang's own executable in lld's job) and the same key (which
// names the compiler as clang reads its name: reapi's driverName); the
// -fno-pic and -funroll-loops that thindist adds to lld's jobs go where this
// puts them (cli's asInProcess). Then what lld's DTLTO drops (the target CPU,
// -mllvm, the profiles: the keys differ there, as the objects may), and the
// options of m's compile command if the compilation database has it
// (matched).
func (p *plan) command(a *action.Action, m *Module, compiler string, f linkFlags) (matched bool, err error) {
	mf, err := p.moduleFlags(m)
	if err != nil {
		return false, err
	}
	lits := func(fs ...string) {
		for _, f := range fs {
			if f != "" {
				a.Args = append(a.Args, action.Lit(f))
			}
		}
	}
	lits(compiler, "-c", mf.target)
	lits(f.lld...)
	lits(mf.reloc, "-Wno-unused-command-line-argument")
	lits(f.extra...)
	addProfile := func(path string) {
		a.Inputs = append(a.Inputs, action.Input{Path: path, Role: action.RoleCommon})
		a.Args = append(a.Args, action.In("-fprofile-sample-use=", len(a.Inputs)-1))
	}
	for _, prof := range f.profiles {
		addProfile(p.portable(prof))
	}
	cc := p.opts.CompDB.lookup(m.Object, m.Member)
	if cc != nil {
		for _, f := range frontendFiltered(cc.args) {
			if v, ok := strings.CutPrefix(f, "-fprofile-sample-use="); ok {
				if !filepath.IsAbs(v) {
					v = filepath.Join(cc.dir, v)
				}
				addProfile(p.portable(v))
				continue
			}
			lits(f)
		}
		// Again, so that they win over the compile command's own.
		lits(mf.target, mf.reloc)
	}
	// "-x ir" in case the module's name is a source file's; the key leaves
	// it out where it changes nothing (reapi's keyed).
	a.Args = append(a.Args, action.Lit("-x"), action.Lit("ir"), action.In("", 0),
		action.In("-fthinlto-index=", 1), action.Lit("-o"), action.Out("", 0))
	return cc != nil, nil
}

// compiler returns the clang that runs the backends: Options.Compiler, the
// link's own driver, or for lld run directly the clang installed beside it
// (ld.lld-19 -> clang-19, also through a symbolic link), else clang-<major>
// of lld's own version found in PATH (for a wrapper script), since the
// backend must be the LLVM that wrote the index.
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
	cands := []string{}
	if suffix, ok := strings.CutPrefix(filepath.Base(ld), "ld.lld"); ok {
		cands = append(cands, filepath.Join(filepath.Dir(ld), "clang"+suffix))
	}
	if real, err := filepath.EvalSymlinks(ld); err == nil {
		if suffix, ok := strings.CutPrefix(filepath.Base(real), "ld.lld"); ok {
			cands = append(cands, filepath.Join(filepath.Dir(real), "clang"+suffix))
		}
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	if p.lldMajorVersion != "" {
		if c, err := exec.LookPath("clang-" + p.lldMajorVersion); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("cannot find the clang of the same LLVM as %s to run the backends; give it with --compiler", p.line.compiler)
}
