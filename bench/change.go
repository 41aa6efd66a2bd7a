package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// The one-source change of issue 3's "relink after one source change": one
// module's source is edited (a constant in the body of a function that other
// modules import), that one object is recompiled, and the link runs again.
// Both versions of the affected file are prepared once, beside it, and
// change/restore copy one or the other into place, so every repetition
// starts from the same bytes.

// swapFiles sets p.change and p.restore to copy changed or orig over file.
// While the changed version is in place a marker says so (swappedMark), so
// that a bench killed before it restored file is undone by the next one
// (healSwap), which would otherwise take the changed file for the original.
func swapFiles(p *project, file, orig, changed string) {
	p.change = func() error {
		if err := atomicfile.WriteFile(swappedMark(file), []byte(orig), 0o644); err != nil {
			return err
		}
		return copyOver(changed, file)
	}
	p.restore = func() error {
		if err := copyOver(orig, file); err != nil {
			return err
		}
		if err := os.Remove(swappedMark(file)); !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
}

// swappedMark names the marker that file holds its changed version; the
// marker holds the path of the original's copy.
func swappedMark(file string) string { return file + ".bench-swapped" }

// healSwap puts file's original back if a bench was stopped while the
// changed version was in place.
func healSwap(file string) error {
	orig, err := os.ReadFile(swappedMark(file))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := copyOver(string(orig), file); err != nil {
		return fmt.Errorf("putting back the original of %s after an interrupted run: %w", file, err)
	}
	fmt.Fprintf(os.Stderr, "bench: %s: put back its original (%s), left changed by an interrupted run\n", file, orig)
	return os.Remove(swappedMark(file))
}

// copyOver replaces file with a copy of from, atomically.
func copyOver(from, file string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(file, b, 0o644)
}

func runIn(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", name, args, err, out)
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// luaFlags are realproj's flags for lua5.4 (upstream's `make linux`, ThinLTO).
var luaFlags = []string{"-O2", "-flto=thin", "-Wall", "-DLUA_COMPAT_5_3", "-DLUA_USE_LINUX"}

// prepareLuaChange edits lmem.c's MINSIZEARRAY (the smallest array
// luaM_growaux_ allocates; a constant of its body, the behaviour stays the
// same) from 4 to 8, recompiles lmem.o and puts it into a copy of liblua.a.
// luaM_growaux_ is called by the parser, the code generator, the string and
// function modules, which may import it. The source tree is not touched.
func prepareLuaChange(ctx context.Context, t *tools, p *project, src string) error {
	b := p.build
	cdir := filepath.Join(b.Dir, "bench-change")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	orig, err := os.ReadFile(filepath.Join(src, "src", "lmem.c"))
	if err != nil {
		return err
	}
	old := []byte("#define MINSIZEARRAY\t4\n")
	if !bytes.Contains(orig, old) {
		return fmt.Errorf("lmem.c has no %q", old)
	}
	edited := bytes.Replace(orig, old, []byte("#define MINSIZEARRAY\t8\n"), 1)
	if err := os.WriteFile(filepath.Join(cdir, "lmem.c"), edited, 0o644); err != nil {
		return err
	}
	args := append(append([]string{}, luaFlags...), "-I", filepath.Join(src, "src"), "-I", b.Dir, "-c", "lmem.c", "-o", "lmem.o")
	if err := runIn(ctx, cdir, t.tc.Clang, args...); err != nil {
		return err
	}
	lib := filepath.Join(b.Dir, "liblua.a")
	if err := healSwap(lib); err != nil {
		return err
	}
	if err := copyFile(lib, filepath.Join(cdir, "liblua.a")); err != nil {
		return err
	}
	if err := runIn(ctx, cdir, t.tc.AR, "r", "liblua.a", "lmem.o"); err != nil {
		return err
	}
	if err := copyFile(lib, lib+".bench-orig"); err != nil {
		return err
	}
	swapFiles(p, lib, lib+".bench-orig", filepath.Join(cdir, "liblua.a"))
	p.changeDesc = "lmem.c: MINSIZEARRAY 4 → 8 (used in luaM_growaux_'s body), lmem.o recompiled, liblua.a updated (`llvm-ar r`)"
	p.checkChanged = p.check // same behaviour
	return nil
}

var fConst = regexp.MustCompile(`(unsigned f_0\(unsigned x\) \{ return x \* \d+u \+ tbl\[x & 7u\] \+ )(\d+)(u; \})`)

// prepareGenChange changes the constant added in f_0 (module m0.c), which
// main does not call directly but m0's step_0 and another module's step
// import and inline, and recompiles m0.o. The program's checksum changes;
// the expected output is that of an uncached in-process link of the changed
// objects.
func prepareGenChange(ctx context.Context, t *tools, p *project, prog *testprog.Program) error {
	m := prog.Modules[1]
	if m.Source != "m0.c" || m.Spelling != "m0.o" {
		return fmt.Errorf("module 1 is %+v, want m0.c", m)
	}
	dir := prog.Dir
	srcPath := filepath.Join(dir, m.Source)
	orig, err := os.ReadFile(srcPath)
	if err != nil {
		return err
	}
	sm := fConst.FindSubmatch(orig)
	if sm == nil {
		return fmt.Errorf("%s: no f_0 of the expected form", m.Source)
	}
	v, _ := strconv.ParseUint(string(sm[2]), 10, 32)
	edited := fConst.ReplaceAll(orig, []byte(fmt.Sprintf("${1}%d${3}", uint32(v+1))))
	obj := filepath.Join(dir, m.Object)
	if err := healSwap(obj); err != nil {
		return err
	}
	if err := copyFile(obj, obj+".bench-orig"); err != nil {
		return err
	}
	// Compile as testprog does, then put the source back.
	if err := os.WriteFile(srcPath, edited, 0o644); err != nil {
		return err
	}
	err = runIn(ctx, dir, t.tc.Clang, "-flto=thin", "-O2", "-c", m.Source, "-o", m.Object+".bench-changed")
	if werr := os.WriteFile(srcPath, orig, 0o644); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	swapFiles(p, obj, obj+".bench-orig", obj+".bench-changed")
	p.changeDesc = fmt.Sprintf("m0.c: the constant added in f_0's body %s → %d, m0.o recompiled", sm[2], uint32(v+1))

	// The expected output of the changed program.
	if err := p.change(); err != nil {
		return err
	}
	defer p.restore()
	ref := "bench-ref.out"
	if err := runIn(ctx, dir, t.tc.Clang, p.build.LinkArgs(ref)...); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, ref))
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running the changed program: %v", err)
	}
	want := string(out)
	if want == prog.Want {
		return fmt.Errorf("the change does not change the output (%q)", want)
	}
	p.checkChanged = func(ctx context.Context, exe string) error { return expectOutput(ctx, dir, want, exe) }
	return nil
}
