package thinlink_test

// A small generator of C/C++ test programs covering what real links have:
// plain bitcode objects (C and C++), a regular archive with an unused member
// that must not be linked, a thin archive, a --whole-archive archive whose
// only effect is a constructor, an assembly object, a -fno-lto object that
// calls into bitcode, an object none of whose symbols are used, and a hot
// loop for the per-module options check.

import (
	"bytes"
	"context"
	"encoding/json"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/source/thinlink"
	"github.com/thindist/thindist/internal/testsupport"
)

type toolchain struct {
	name string
	bin  string // directory holding clang, clang++, llvm-ar
}

func (tc toolchain) tool(name string) string { return filepath.Join(tc.bin, name) }

// toolchains returns Debian's LLVM 19 and 22; a missing one fails the test
// unless THINDIST_TEST_ALLOW_MISSING_LLVM is set, so that the two-version
// check is not silently skipped. Its tests are in the full tier only.
func toolchains(t *testing.T) []toolchain {
	testsupport.Slow(t, "compiles and links programs with clang/lld 19 and 22, through thindist link and in process")
	var out []toolchain
	for _, v := range []string{"19", "22"} {
		bin := "/usr/lib/llvm-" + v + "/bin"
		_, e1 := os.Stat(filepath.Join(bin, "clang"))
		_, e2 := os.Stat(filepath.Join(bin, "ld.lld"))
		if e1 != nil || e2 != nil {
			if os.Getenv("THINDIST_TEST_ALLOW_MISSING_LLVM") == "" {
				t.Fatalf("LLVM %s (clang and lld) not found in %s", v, bin)
			}
			continue
		}
		out = append(out, toolchain{name: "llvm-" + v, bin: bin})
	}
	if len(out) == 0 {
		t.Skip("no LLVM toolchain")
	}
	return out
}

var sources = map[string]string{
	"core.c": `int registry = 0;
int f_core(int x) { return x * 3 + 1; }
`,
	"a1.c": `int f_core(int);
int f_lib(int x) { return f_core(x) + 10; }
`,
	// Never referenced: linking it would fail on the missing symbol.
	"a2.c": `extern int missing_symbol(void);
int f_unused_member(void) { return missing_symbol(); }
`,
	// A native (-fno-lto) member of the same archive as bitcode ones.
	"an.c": `int f_anative(int x) { return x + 5; }
`,
	// Unused native member: linking it would fail on the missing symbol.
	"an2.c": `extern int missing_symbol3(void);
int f_an2(void) { return missing_symbol3(); }
`,
	// A bitcode member whose only function main inlines: the thin link
	// extracts it, so its constructor runs in-process and must run here.
	"a3.c": `extern int registry;
int f_small(int x) { return x + 1; }
__attribute__((constructor)) static void reg3(void) { registry += 20; }
`,
	// A native archive's member referred to only by code that ThinLTO
	// removes (never() is 0): extracted by the thin link, so linked.
	"n.c": `extern int registry;
int f_n(int x) { return x; }
__attribute__((constructor)) static void regn(void) { registry += 300; }
`,
	"nv.c": `int never(void) { return 0; }
`,
	"t1.c": `int f_core(int);
int f_thin(int x) { return f_core(x) * 2; }
`,
	"t2.c": `extern int missing_symbol2(void);
int f_unused_thin(void) { return missing_symbol2(); }
`,
	// Only --whole-archive links it.
	"w1.c": `extern int registry;
__attribute__((constructor)) static void reg(void) { registry += 1000; }
`,
	"asm.s": `.globl f_asm
.type f_asm,@function
f_asm:
  movl $42, %eax
  ret
.section .note.GNU-stack,"",@progbits
`,
	"nolto.c": `int f_core(int);
int f_nolto(int x) { return f_core(x) + 100; }
`,
	"dead.c": `int f_dead(int x) { return x - 1; }
`,
	"hot.c": `int f_hot(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += a[i] * a[i];
  return s;
}
`,
	"cls.cpp": `#include <string>
struct Shape { virtual ~Shape() {} virtual int area() const = 0; };
struct Sq : Shape { int s; explicit Sq(int s) : s(s) {} int area() const override { return s * s; } };
extern "C" int f_cpp(int x) {
  Sq q(x);
  const Shape &s = q;
  std::string str(x, 'a');
  return s.area() + (int)str.size();
}
`,
	"main.cpp": `#include <cstdio>
extern "C" {
int f_core(int); int f_lib(int); int f_thin(int); int f_asm(void); int f_nolto(int);
int f_hot(const int *, int); int f_cpp(int); int f_anative(int);
int f_small(int); int never(void); int f_n(int);
extern int registry;
}
int main(int argc, char **) {
  int a[100];
  for (int i = 0; i < 100; i++) a[i] = i + argc;
  int n = never() ? f_n(argc) : f_small(argc);
  std::printf("core=%d lib=%d thin=%d asm=%d nolto=%d hot=%d cpp=%d anative=%d small=%d registry=%d\n",
              f_core(argc + 1), f_lib(argc + 1), f_thin(argc + 1), f_asm(), f_nolto(argc + 1),
              f_hot(a, 100), f_cpp(argc + 2), f_anative(argc), n, registry);
  return 0;
}
`,
	// A shared library and its user.
	"s1.c": `int f_s2(int);
int f_shared(int x) { return f_s2(x) + 1; }
`,
	"s2.c": `int f_s2(int x) { return x * 5; }
`,
	"mainso.c": `#include <stdio.h>
int f_shared(int);
int main(void) { printf("shared=%d\n", f_shared(4)); return 0; }
`,
	// A relocatable link's parts and its user.
	"r1.c": `int f_r2(int);
int f_rel(int x) { return f_r2(x) + 7; }
`,
	"r2.c": `int f_r2(int x) { return x * x; }
`,
	// A kernel-like relocatable link run with ld.lld itself.
	"k1.c": `int k_helper(int); int f_asm(void);
int k_init(void) { return k_helper(3) + f_asm(); }
`,
	"k2.c": `int k_helper(int x) { return x * 11; }
`,
	"maink.c": `#include <stdio.h>
int k_init(void);
int main(void) { printf("k=%d\n", k_init()); return 0; }
`,
	"mainr.c": `#include <stdio.h>
int f_rel(int);
int main(void) { printf("rel=%d\n", f_rel(6)); return 0; }
`,
}

const (
	wantMain = "core=7 lib=17 thin=14 asm=42 nolto=107 hot=338350 cpp=12 anative=6 small=2 registry=1320\n"
	wantSO   = "shared=21\n"
	wantRel  = "rel=43\n"
	wantK    = "k=75\n"
)

// project is a generated program, compiled.
type project struct {
	dir   string
	tc    toolchain
	cache string // the action cache every link of this project shares
}

func run(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.String()
}

// compileFlags are the compile options of each source, as a build would
// record them in its compilation database.
func compileFlags(src string) []string {
	switch {
	case strings.HasSuffix(src, ".s"):
		return []string{"-c"}
	case src == "nolto.c" || src == "an.c" || src == "an2.c" || src == "n.c" || src == "maink.c":
		return []string{"-O2", "-c"}
	case src == "s1.c" || src == "s2.c":
		return []string{"-O2", "-flto=thin", "-fPIC", "-c"}
	}
	return []string{"-O2", "-flto=thin", "-c", "-DTHINDIST_TEST=1", "-Iinclude", "-MD", "-MF", "obj/" + src + ".d"}
}

func newProject(t *testing.T, tc toolchain) *project {
	t.Helper()
	dir := t.TempDir()
	p := &project{dir: dir, tc: tc, cache: t.TempDir()}
	for _, d := range []string{"src", "obj", "lib", "include", "sub"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	for name, text := range sources {
		os.WriteFile(filepath.Join(dir, "src", name), []byte(text), 0o644)
	}
	var db []map[string]any
	for name := range sources {
		cc := tc.tool("clang")
		if strings.HasSuffix(name, ".cpp") {
			cc = tc.tool("clang++")
		}
		obj := "obj/" + strings.TrimSuffix(name, filepath.Ext(name)) + ".o"
		args := append(append([]string{cc}, compileFlags(name)...), "src/"+name, "-o", obj)
		run(t, dir, nil, args...)
		db = append(db, map[string]any{"directory": dir, "file": "src/" + name, "arguments": args, "output": obj})
	}
	data, _ := json.MarshalIndent(db, "", "  ")
	os.WriteFile(filepath.Join(dir, "compile_commands.json"), data, 0o644)
	ar := tc.tool("llvm-ar")
	run(t, dir, nil, ar, "rcs", "lib/liba.a", "obj/a1.o", "obj/an.o", "obj/a2.o", "obj/an2.o", "obj/a3.o")
	run(t, dir, nil, ar, "rcs", "lib/libn.a", "obj/n.o")
	run(t, dir, nil, ar, "rcsT", "lib/libt.a", "obj/t1.o", "obj/t2.o")
	run(t, dir, nil, ar, "rcs", "lib/libw.a", "obj/w1.o")
	run(t, dir, nil, ar, "rcsT", "vmlinux.a", "obj/k1.o", "obj/asm.o", "obj/k2.o")
	os.WriteFile(filepath.Join(dir, "objs.rsp"), []byte("obj/core.o 'obj/cls.o'\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "lt.rsp"), []byte("lib/libt.a\n"), 0o644)
	return p
}

// mainLink is the program's link command: response file, -L/-l, archives
// inside -Wl, (whole and thin), an absolute path and a path through "..".
func (p *project) mainLink(out string) []string {
	return []string{p.tc.tool("clang++"), "-O2", "-flto=thin", "-fuse-ld=lld",
		"obj/main.o", "@objs.rsp",
		"-Wl,--whole-archive", "lib/libw.a", "-Wl,--no-whole-archive",
		"-Llib", "-la", "-Wl,@lt.rsp", "-ln", "obj/nv.o",
		"obj/asm.o", "obj/nolto.o", filepath.Join(p.dir, "obj/dead.o"), "sub/../obj/hot.o",
		"-o", out}
}

type linkRun struct {
	res    *thinlink.Result
	stderr string
}

// link runs `thindist link` through the same pipeline as the command.
func (p *project) link(t *testing.T, cmd []string, mod func(*thinlink.Options)) (*linkRun, error) {
	t.Helper()
	var stderr bytes.Buffer
	cfg := &config.Config{Jobs: 4, Progress: "never", Quiet: true, CacheDir: p.cache, CacheSize: "1G"}
	env := pipeline.Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	opts := thinlink.Options{
		Command: cmd,
		Dir:     p.dir,
		Stdout:  &stderr,
		Stderr:  &stderr,
		Run: func(ctx context.Context, actions []*action.Action) error {
			return pipeline.RunWith(ctx, cfg, env, actions, pipeline.Options{})
		},
	}
	if mod != nil {
		mod(&opts)
	}
	res, err := thinlink.Link(context.Background(), opts)
	return &linkRun{res: res, stderr: stderr.String()}, err
}

func (p *project) mustLink(t *testing.T, cmd []string, mod func(*thinlink.Options)) *thinlink.Result {
	t.Helper()
	lr, err := p.link(t, cmd, mod)
	if err != nil {
		t.Fatalf("thindist link %s: %v\n%s", strings.Join(cmd, " "), err, lr.stderr)
	}
	return lr.res
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func mustEqual(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// eachToolchain runs test as a parallel subtest per installed toolchain,
// each with a project of its own.
func eachToolchain(t *testing.T, test func(t *testing.T, tc toolchain, p *project)) {
	for _, tc := range toolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			test(t, tc, newProject(t, tc))
		})
	}
}
