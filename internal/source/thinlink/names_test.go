package thinlink_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/source/thinlink"
)

// importOrderSources make a program whose main imports from four modules
// the addresses of their statics, which it lets escape: the order in which
// its backend imports from them shows in its object (the order of its
// address-significance table). Their names sort one way in-process
// (lib/libo.a(alpha.o at N) < lib/libo.a(beta.o at N) < lib/libr.a(kappa.o
// at N) < obj/zeta.o) and another way by the files' own paths (a/beta.o <
// obj/zeta.o < r/kappa.o < z/alpha.o).
var importOrderSources = map[string]string{
	"z/alpha.c":  source("a", 1),
	"a/beta.c":   source("b", 2),
	"r/kappa.c":  source("k", 3),
	"obj/zeta.c": source("z", 4),
	"obj/ext.c": `__attribute__((noinline)) int ext_a(int x) { return x * 3; }
__attribute__((noinline)) int ext_b(int x) { return x * 5; }
__attribute__((noinline)) int ext_k(int x) { return x * 7; }
__attribute__((noinline)) int ext_z(int x) { return x * 11; }
`,
	"obj/main.c": `#include <stdio.h>
int f_a(int), f_b(int), f_k(int), f_z(int);
int *p_a(void), *p_b(void), *p_k(void), *p_z(void);
int *volatile sink;
int main(int argc, char **argv) {
  sink = p_z(); sink = p_k(); sink = p_b(); sink = p_a();
  printf("%d\n", f_z(argc) + f_k(argc) + f_b(argc) + f_a(argc));
  return 0;
}
`,
}

// source is a module with a global, a static whose address a function
// returns (main imports a reference to it), and a function calling one of
// obj/ext.c's.
func source(s string, n int) string {
	return fmt.Sprintf(`int ext_%[1]s(int);
int v_%[1]s = %[2]d;
static int s_%[1]s = %[2]d;
int *p_%[1]s(void) { return &s_%[1]s; }
int f_%[1]s(int x) { return ext_%[1]s(x) + v_%[1]s + *p_%[1]s(); }
`, s, n)
}

// TestImportOrderAsInProcess: every native object is byte-identical to
// lld's in-process one, main's included, which differs when its backend
// imports from its sources in another order: thindist names each module as
// lld does in-process (thin and regular archive members, plain objects), so
// the names sort alike. On LLVM 19 and 22, with the separate thin link and
// (22) in one lld process.
func TestImportOrderAsInProcess(t *testing.T) {
	for _, tc := range toolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, link := importOrderProject(t, tc)
			os.MkdirAll(filepath.Join(p.dir, "ref-objs"), 0o755)
			run(t, p.dir, nil, append(link("ref"), "-Wl,--lto-obj-path=ref-objs/lto")...)
			want := run(t, p.dir, nil, "./ref")
			mustEqual(t, "in-process build's output", want, "46\n")
			for _, separate := range []bool{true, false} {
				res := p.mustLink(t, link("app"), func(o *thinlink.Options) {
					o.SeparateThinLink = separate
					o.KeepNativeObjects = "kept"
				})
				mustEqual(t, "thindist link build's output", run(t, p.dir, nil, "./app"), want)
				if len(res.Modules) != 6 {
					t.Errorf("%d modules compiled, want 6", len(res.Modules))
				}
				sameAsInProcess(t, p, "ref-objs", res)
				// The same link again comes from the cache: objects
				// compiled with this order.
				res = p.mustLink(t, link("app2"), func(o *thinlink.Options) {
					o.SeparateThinLink = separate
					o.KeepNativeObjects = "kept"
				})
				sameAsInProcess(t, p, "ref-objs", res)
			}
		})
	}
}

// importOrderProject compiles importOrderSources, makes lib/libo.a (thin)
// and lib/libr.a, and returns the project and its link command.
func importOrderProject(t *testing.T, tc toolchain) (*project, func(out string) []string) {
	dir := t.TempDir()
	p := &project{dir: dir, tc: tc, cache: t.TempDir()}
	for name, text := range importOrderSources {
		src := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(src), 0o755)
		os.WriteFile(src, []byte(text), 0o644)
		run(t, dir, nil, tc.tool("clang"), "-O2", "-flto=thin", "-c", name, "-o", name[:len(name)-1]+"o")
	}
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	run(t, dir, nil, tc.tool("llvm-ar"), "rcsT", "lib/libo.a", "z/alpha.o", "a/beta.o")
	run(t, dir, nil, tc.tool("llvm-ar"), "rcs", "lib/libr.a", "r/kappa.o")
	return p, func(out string) []string {
		return []string{tc.tool("clang"), "-fuse-ld=lld", "-flto=thin", "obj/main.o", "lib/libo.a",
			"-Llib", "-lr", "obj/zeta.o", "obj/ext.o", "-o", out}
	}
}

// TestDependencyFileAsInProcess: the linker's --dependency-file names the
// command's inputs (the archives, the objects), as an in-process link's
// does, not the files of the work directory that stood for them: with one
// lld process the same file but for the target, with the separate thin
// link the same dependencies. On LLVM 19 and 22.
func TestDependencyFileAsInProcess(t *testing.T) {
	for _, tc := range toolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, link := importOrderProject(t, tc)
			run(t, p.dir, nil, append(link("ref"), "-Wl,--dependency-file=ref.d")...)
			ref := readDeps(t, filepath.Join(p.dir, "ref.d"))
			for _, separate := range []bool{true, false} {
				p.mustLink(t, append(link("app"), "-Wl,--dependency-file=app.d"), func(o *thinlink.Options) {
					o.SeparateThinLink = separate
				})
				got := readDeps(t, filepath.Join(p.dir, "app.d"))
				if got[0] != "app: \\" || ref[0] != "ref: \\" {
					t.Fatalf("targets %q and %q", got[0], ref[0])
				}
				got, want := got[1:], slices.Clone(ref[1:])
				if separate {
					// The final link has the native objects at its end:
					// the same dependencies, in another order.
					got, want = depSet(got), depSet(want)
				}
				if !slices.Equal(got, want) {
					t.Errorf("separate thin link %v: dependency file\n%q\nin-process:\n%q", separate, got, want)
				}
			}
		})
	}
}

// depSet returns the dependencies of a dependency file's lines after the
// target's, sorted.
func depSet(lines []string) []string {
	var deps []string
	for _, l := range lines {
		if d, ok := strings.CutPrefix(strings.TrimSuffix(l, " \\"), " "); ok {
			deps = append(deps, d)
		}
	}
	slices.Sort(deps)
	return deps
}

func readDeps(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "lib/libo.a") {
		t.Fatalf("%s does not name lib/libo.a:\n%s", path, data)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestModuleNamesMeet: an object named by its absolute path and another
// whose relative path is that one without its leading "/" would share a
// file under the work directory's m/; the second gets a name of its own
// ("~2"), and both link as in-process.
func TestModuleNamesMeet(t *testing.T) {
	tc := toolchains(t)[len(toolchains(t))-1]
	dir := t.TempDir()
	p := &project{dir: dir, tc: tc, cache: t.TempDir()}
	for _, name := range []string{"obj/zeta.c", "obj/ext.c"} {
		src := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(src), 0o755)
		os.WriteFile(src, []byte(importOrderSources[name]), 0o644)
		run(t, dir, nil, tc.tool("clang"), "-O2", "-flto=thin", "-c", name, "-o", name[:len(name)-1]+"o")
	}
	os.WriteFile(filepath.Join(dir, "main.c"), []byte("#include <stdio.h>\nint f_z(int);\n"+
		"int main(int argc, char **argv) { printf(\"%d\\n\", f_z(argc)); return 0; }\n"), 0o644)
	run(t, dir, nil, tc.tool("clang"), "-O2", "-flto=thin", "-c", "main.c", "-o", "main.o")
	abs := filepath.Join(dir, "obj/zeta.o")
	rel := strings.TrimPrefix(abs, "/") // the same name, relative: a copy under dir
	os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755)
	data, _ := os.ReadFile(abs)
	os.WriteFile(filepath.Join(dir, rel), append(data, 0, 0, 0, 0), 0o644) // another file
	link := func(out string) []string {
		return []string{tc.tool("clang"), "-fuse-ld=lld", "-flto=thin", "main.o", abs,
			"-Wl,--start-lib", rel, "-Wl,--end-lib", "obj/ext.o", "-o", out}
	}
	os.MkdirAll(filepath.Join(dir, "ref-objs"), 0o755)
	run(t, dir, nil, append(link("ref"), "-Wl,--lto-obj-path=ref-objs/lto")...)
	want := run(t, dir, nil, "./ref")
	mustEqual(t, "in-process build's output", want, "19\n")
	res := p.mustLink(t, link("app"), func(o *thinlink.Options) {
		o.KeepNativeObjects = "kept"
		o.SeparateThinLink = true
		o.KeepWorkDir = true
	})
	mustEqual(t, "thindist link build's output", run(t, dir, nil, "./app"), want)
	thin := strings.Join(readRsp(t, filepath.Join(dir, strings.TrimPrefix(res.ThinLink[1], "@"))), " ")
	for _, name := range []string{"app.thindist.d/m/" + abs + " ", "app.thindist.d/m/" + rel + "~2 "} {
		if !strings.Contains(thin, name) {
			t.Errorf("the thin link does not name %s: %s", name, thin)
		}
	}
	sameAsInProcess(t, p, "ref-objs", res)
}
