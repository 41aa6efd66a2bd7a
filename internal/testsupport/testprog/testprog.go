// Package testprog generates synthetic multi-module C and C++ programs for
// thindist's tests and benchmarks.
//
// A program has a main module and Modules-1 helper modules. Helper k has
// static constant data (a table), a global variable, a small function f_k
// that reads the table, and step_k, which calls its own f_k and the f_j of
// another module (a real cross-module inlining opportunity that also forces
// ThinLTO to promote the other module's static table). main calls every
// step_k twice and prints a checksum of the results, so the output depends on
// every module's code and data: a module whose code is missing makes the
// link fail, and a wrong or stale object changes the output. The expected
// output is computed independently, in Go (Program.Want).
package testprog

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// NameStyle selects how file names are spelled.
type NameStyle int

const (
	// Plain names: m1.c, m2.c, ... in the program's directory.
	Plain NameStyle = iota
	// Tricky names: spaces, parentheses, nested directories, and objects
	// spelled on the link line as "sub/../m3.o". ASCII only.
	Tricky
	// NonASCII is Tricky plus some names with non-ASCII characters (which
	// LLVM 22.1.8 mishandles in DTLTO, llvm/llvm-project#194318).
	NonASCII
)

// Options describes a program.
type Options struct {
	// Modules is the number of modules, main included (at least 2).
	Modules int
	// CXX generates C++ (namespaces, mangled names, dynamic initialisation)
	// instead of C.
	CXX bool
	// Seed makes the constants, and so the output, vary.
	Seed int64
	// ArchiveModules helper modules go into a regular static archive
	// (libfoo.a), ThinArchiveModules into a thin archive (libthin.a).
	ArchiveModules     int
	ThinArchiveModules int
	Names              NameStyle
}

// Module is one source file of a program.
type Module struct {
	Source string // relative to Program.Dir
	Object string // where Compile writes the object, relative to Program.Dir
	// Spelling is how the link line names the object ("sub/../m3.o"); empty
	// for archive members.
	Spelling string
	// Archive is the archive holding the object ("libfoo.a", "libthin.a"),
	// or "".
	Archive string
}

// Program is a generated program.
type Program struct {
	Dir     string
	Options Options
	Modules []Module // Modules[0] is main
	// Objects is the link line, in order: object spellings and archives,
	// relative to Dir.
	Objects []string
	// Want is the program's expected standard output.
	Want string
}

const (
	regularArchive = "libfoo.a"
	thinArchive    = "libthin.a"
)

type helper struct {
	a, b, g uint32
	tbl     [8]uint32
	callee  int
}

func (h *helper) f(x uint32) uint32 { return x*h.a + h.tbl[x&7] + h.b }

// Generate writes the program's sources under dir (created if needed).
func Generate(dir string, o Options) (*Program, error) {
	if o.Modules < 2 {
		return nil, fmt.Errorf("testprog: need at least 2 modules, not %d", o.Modules)
	}
	n := o.Modules - 1
	if o.ArchiveModules < 0 || o.ThinArchiveModules < 0 || o.ArchiveModules+o.ThinArchiveModules > n {
		return nil, fmt.Errorf("testprog: %d archive and %d thin archive members do not fit %d helper modules",
			o.ArchiveModules, o.ThinArchiveModules, n)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	hs := randomHelpers(o.Seed, n)
	ext := ".c"
	if o.CXX {
		ext = ".cpp"
	}
	p := &Program{Dir: dir, Options: o}
	p.layOut(n, ext)

	// Sources.
	files := map[string][]byte{p.Modules[0].Source: mainSource(n, o)}
	for k := 0; k < n; k++ {
		files[p.Modules[k+1].Source] = helperSource(k, hs, o.CXX)
	}
	for _, m := range p.Modules {
		for _, f := range []string{m.Source, m.Object, m.Spelling} {
			if err := mkdirs(dir, f); err != nil {
				return nil, err
			}
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o666); err != nil {
			return nil, err
		}
	}
	p.Want = expectedOutput(hs, o)
	return p, nil
}

// randomHelpers draws the n helper modules' constants from seed, and who
// each one calls.
func randomHelpers(seed int64, n int) []helper {
	rng := rand.New(rand.NewSource(seed))
	hs := make([]helper, n)
	for k := range hs {
		h := &hs[k]
		h.a, h.b, h.g = rng.Uint32()|1, rng.Uint32(), rng.Uint32()%1000
		for i := range h.tbl {
			h.tbl[i] = rng.Uint32()
		}
		h.callee = (k*7 + 1) % n
		if n > 1 && h.callee == k {
			h.callee = (k + 1) % n
		}
	}
	return hs
}

// layOut fills p.Modules (main, then the n helpers, the last ones members
// of the regular then the thin archive, as p.Options asks) and p.Objects,
// what the link command names.
func (p *Program) layOut(n int, ext string) {
	o := p.Options
	p.Modules = append(p.Modules, Module{Source: "main" + ext, Object: "main.o", Spelling: "main.o"})
	firstArchive := n - o.ArchiveModules - o.ThinArchiveModules
	for k := 0; k < n; k++ {
		m := name(k, o.Names, ext)
		switch {
		case k >= firstArchive+o.ArchiveModules:
			m.Archive, m.Spelling = thinArchive, ""
		case k >= firstArchive:
			m.Archive, m.Spelling = regularArchive, ""
		}
		p.Modules = append(p.Modules, m)
	}
	for _, m := range p.Modules {
		if m.Spelling != "" {
			p.Objects = append(p.Objects, m.Spelling)
		}
	}
	if o.ArchiveModules > 0 {
		p.Objects = append(p.Objects, regularArchive)
	}
	if o.ThinArchiveModules > 0 {
		p.Objects = append(p.Objects, thinArchive)
	}
}

// mainSource is the main module's source: it calls every helper's step
// twice and prints a checksum of what they return.
func mainSource(n int, o Options) []byte {
	var main bytes.Buffer
	if o.CXX {
		main.WriteString("#include <cstdio>\nnamespace tp {\n")
	} else {
		main.WriteString("#include <stdio.h>\n")
	}
	for k := 0; k < n; k++ {
		fmt.Fprintf(&main, "unsigned step_%d(unsigned);\n", k)
	}
	if o.CXX {
		main.WriteString("}\nusing namespace tp;\n")
	}
	main.WriteString("int main(void) {\n  unsigned h = 2166136261u;\n")
	for r := 0; r < 2; r++ {
		for k := 0; k < n; k++ {
			fmt.Fprintf(&main, "  h = (h ^ step_%d(%du)) * 16777619u;\n", k, uint32(k+1000*r))
		}
	}
	fmt.Fprintf(&main, "  printf(\"modules %d checksum %%u\\n\", h);\n  return 0;\n}\n", o.Modules)
	return main.Bytes()
}

// expectedOutput computes what the program prints, as mainSource and
// helperSource make it compute it.
func expectedOutput(hs []helper, o Options) string {
	n := len(hs)
	g := make([]uint32, n)
	for k := range hs {
		g[k] = hs[k].g
		if o.CXX {
			g[k] = hs[k].f(hs[k].g)
		}
	}
	h := uint32(2166136261)
	for r := 0; r < 2; r++ {
		for k := 0; k < n; k++ {
			x := uint32(k + 1000*r)
			g[k]++
			v := hs[k].f(x) ^ hs[hs[k].callee].f(x+1) ^ g[k]
			h = (h ^ v) * 16777619
		}
	}
	return fmt.Sprintf("modules %d checksum %d\n", o.Modules, h)
}

// mkdirs creates every directory the raw spelling f walks through, even
// those it leaves again with "..", so that "sub/../m3.o" resolves.
func mkdirs(dir, f string) error {
	parts := strings.Split(f, "/")
	cur := dir
	for _, c := range parts[:len(parts)-1] {
		cur += "/" + c
		if c == ".." || c == "." || c == "" {
			continue
		}
		if err := os.Mkdir(cur, 0o777); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// name spells helper k's files.
func name(k int, style NameStyle, ext string) Module {
	base := fmt.Sprintf("m%d", k)
	var src, obj, spell string
	switch {
	case style == Plain || k%6 == 0:
		src = base + ext
		obj = base + ".o"
		spell = obj
	case k%6 == 1:
		src = "dir with space/" + base + " x" + ext
		obj = "dir with space/" + base + " x.o"
		spell = obj
	case k%6 == 2:
		src = "nested/a/b/" + base + "(p)" + ext
		obj = "nested/a/b/" + base + "(p).o"
		spell = obj
	case k%6 == 3:
		src = base + ext
		obj = base + ".o"
		spell = "sub/../" + obj
	case k%6 == 4:
		src = "p(aren)s/" + base + ext
		obj = "p(aren)s/" + base + ".o"
		spell = "nested/a/../../" + obj
	case style == NonASCII:
		src = "ünï/" + base + "-é" + ext
		obj = "ünï/" + base + "-é.o"
		spell = obj
	default:
		src = "x y (z)/" + base + " (1)" + ext
		obj = "x y (z)/" + base + " (1).o"
		spell = obj
	}
	return Module{Source: src, Object: obj, Spelling: spell}
}

func helperSource(k int, hs []helper, cxx bool) []byte {
	h := &hs[k]
	var b bytes.Buffer
	fmt.Fprintf(&b, "/* helper module %d */\n", k)
	if cxx {
		b.WriteString("namespace tp {\n")
	}
	fmt.Fprintf(&b, "static const unsigned tbl[8] = {")
	for i, v := range h.tbl {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%du", v)
	}
	b.WriteString("};\n")
	fmt.Fprintf(&b, "unsigned f_%d(unsigned x) { return x * %du + tbl[x & 7u] + %du; }\n", k, h.a, h.b)
	if h.callee != k {
		fmt.Fprintf(&b, "unsigned f_%d(unsigned);\n", h.callee)
	}
	if cxx {
		// Dynamic initialisation through a function of this module.
		fmt.Fprintf(&b, "static unsigned init_g() { return f_%d(%du); }\nunsigned g_%d = init_g();\n", k, h.g, k)
	} else {
		fmt.Fprintf(&b, "unsigned g_%d = %du;\n", k, h.g)
	}
	fmt.Fprintf(&b, "unsigned step_%d(unsigned x) {\n  g_%d += 1u;\n  return f_%d(x) ^ f_%d(x + 1u) ^ g_%d;\n}\n",
		k, k, k, h.callee, k)
	if cxx {
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// Compile compiles every module with clang -flto=thin -O2 -c (plus flags)
// into its Object, in parallel, then builds the archives with the llvm-ar
// beside clang (or on PATH).
func (p *Program) Compile(ctx context.Context, clang string, flags ...string) error {
	jobs := make(chan Module)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < runtime.NumCPU(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range jobs {
				args := append([]string{"-flto=thin", "-O2", "-c"}, flags...)
				args = append(args, m.Source, "-o", m.Object)
				cmd := exec.CommandContext(ctx, clang, args...)
				cmd.Dir = p.Dir
				if out, err := cmd.CombinedOutput(); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("compiling %s: %v\n%s", m.Source, err, out)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, m := range p.Modules {
		jobs <- m
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	ar := filepath.Join(filepath.Dir(clang), "llvm-ar")
	if _, err := os.Stat(ar); err != nil {
		ar = "llvm-ar"
	}
	for _, a := range []struct{ name, flags string }{{regularArchive, "rcs"}, {thinArchive, "rcsT"}} {
		var members []string
		for _, m := range p.Modules {
			if m.Archive == a.name {
				members = append(members, m.Object)
			}
		}
		if len(members) == 0 {
			continue
		}
		os.Remove(filepath.Join(p.Dir, a.name))
		cmd := exec.CommandContext(ctx, ar, append([]string{a.flags, a.name}, members...)...)
		cmd.Dir = p.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s %s: %v\n%s", ar, a.flags, a.name, err, out)
		}
	}
	return nil
}

// AbsObjects returns the link line with every object and archive named by
// its absolute path.
func (p *Program) AbsObjects() []string {
	out := make([]string, len(p.Objects))
	for i, o := range p.Objects {
		out[i] = filepath.Join(p.Dir, o)
	}
	return out
}

// WriteSampleProfile writes a tiny text sample profile (for
// -fprofile-sample-use=) at name, relative to Dir, and returns its path.
func (p *Program) WriteSampleProfile(name string) (string, error) {
	var b strings.Builder
	b.WriteString("main:1000:1\n 1: 100\n 2: 100\n")
	for k := 0; k < min(4, p.Options.Modules-1); k++ {
		fn := fmt.Sprintf("f_%d", k)
		if p.Options.CXX {
			fn = fmt.Sprintf("_ZN2tp%d%sEj", len(fn), fn)
		}
		fmt.Fprintf(&b, "%s:500:50\n 0: 50\n", fn)
	}
	path := filepath.Join(p.Dir, name)
	return path, os.WriteFile(path, []byte(b.String()), 0o666)
}
