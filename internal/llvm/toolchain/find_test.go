package toolchain

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
)

const clang22 = "/usr/lib/llvm-22/bin/clang"

func needClang(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(clang22); err != nil {
		t.Skipf("needs Debian's clang 22 at %s: %v", clang22, err)
	}
}

// libNames returns the base names of f's libraries.
func libNames(f *Found) []string {
	var names []string
	for _, l := range f.Libs {
		names = append(names, l.Name)
	}
	return names
}

func hasLib(f *Found, pattern string) bool {
	re := regexp.MustCompile("^" + pattern + "$")
	for _, l := range f.Libs {
		if re.MatchString(l.Name) {
			return true
		}
	}
	return false
}

func TestFindDebianClang(t *testing.T) {
	needClang(t)
	f, err := Find(clang22)
	if err != nil {
		t.Fatal(err)
	}
	if f.Compiler != clang22 || f.Invoked != clang22 {
		t.Errorf("compiler %s invoked %s, want %s", f.Compiler, f.Invoked, clang22)
	}
	if filepath.Base(f.Interp) != "ld-linux-x86-64.so.2" {
		t.Errorf("interpreter %q, want ld-linux-x86-64.so.2", f.Interp)
	}
	if fi, err := os.Lstat(f.Loader); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("loader %s is not a regular file (symbolic links resolved): %v", f.Loader, err)
	}
	for _, want := range []string{`libLLVM\.so\.22.*`, `libclang-cpp\.so\.22.*`, `libc\.so\.6`, `libstdc\+\+\.so\.6`} {
		if !hasLib(f, want) {
			t.Errorf("no library %s among %v", want, libNames(f))
		}
	}
	seen := map[string]bool{}
	for _, l := range f.Libs {
		if seen[l.Name] {
			t.Errorf("%s listed twice", l.Name)
		}
		seen[l.Name] = true
		if l.Name == "ld-linux-x86-64.so.2" {
			t.Errorf("the loader is listed as a library: %v", l)
		}
		if fi, err := os.Lstat(l.Real); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %s is not a regular file: %v", l.Name, l.Real, err)
		}
	}
	// The LLVM libraries come from the RUNPATH ($ORIGIN/../lib), as the
	// loader takes them.
	for _, l := range f.Libs {
		if strings.HasPrefix(l.Name, "libLLVM") && filepath.Dir(l.Path) != "/usr/lib/llvm-22/lib" {
			t.Errorf("libLLVM found at %s, want under $ORIGIN/../lib = /usr/lib/llvm-22/lib", l.Path)
		}
	}
}

func TestFindFollowsSymlinkChain(t *testing.T) {
	needClang(t)
	dir := t.TempDir()
	b := filepath.Join(dir, "b", "clang-b")
	a := filepath.Join(dir, "clang++")
	os.MkdirAll(filepath.Dir(b), 0o755)
	if err := os.Symlink(clang22, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b/clang-b", a); err != nil {
		t.Fatal(err)
	}
	f, err := Find(a)
	if err != nil {
		t.Fatal(err)
	}
	if f.Invoked != a || f.Compiler != clang22 {
		t.Errorf("invoked %s compiler %s, want %s and %s", f.Invoked, f.Compiler, a, clang22)
	}
}

// build compiles a C program with clang 22 and args into dir/out.
func build(t *testing.T, dir, out, src string, args ...string) string {
	t.Helper()
	testsupport.Slow(t, "compiles and links C programs with clang 22")
	c := filepath.Join(dir, filepath.Base(out)+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, out)
	os.MkdirAll(filepath.Dir(p), 0o755)
	cmd := exec.Command(clang22, append([]string{"-fuse-ld=lld", "-o", p, c}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	return p
}

func TestFindStatic(t *testing.T) {
	needClang(t)
	exe := build(t, t.TempDir(), "static", "int main(void){return 0;}", "-static")
	f, err := Find(exe)
	if err != nil {
		t.Fatal(err)
	}
	if f.Interp != "" || len(f.Libs) != 0 {
		t.Errorf("static executable: interpreter %q libraries %v, want none", f.Interp, libNames(f))
	}
}

func TestFindRefusesScript(t *testing.T) {
	p := filepath.Join(t.TempDir(), "clang")
	os.WriteFile(p, []byte("#!/bin/sh\nexec /usr/bin/clang \"$@\"\n"), 0o755)
	_, err := Find(p)
	if err == nil || !strings.Contains(err.Error(), "script") || !strings.Contains(err.Error(), p) {
		t.Fatalf("Find(script) = %v, want an error naming the script", err)
	}
}

// TestFindOriginRunpath: a library found through $ORIGIN/../lib, and a
// clear error naming it once it is gone.
func TestFindOriginRunpath(t *testing.T) {
	needClang(t)
	dir := t.TempDir()
	lib := build(t, dir, "lib/libtcfoo.so", "int foo(void){return 7;}", "-shared", "-fPIC")
	exe := build(t, dir, "bin/prog", "int foo(void); int main(void){return foo();}",
		"-L"+filepath.Join(dir, "lib"), "-ltcfoo", "-Wl,-rpath,$ORIGIN/../lib")
	f, err := Find(exe)
	if err != nil {
		t.Fatal(err)
	}
	var got *Lib
	for i, l := range f.Libs {
		if l.Name == "libtcfoo.so" {
			got = &f.Libs[i]
		}
	}
	if got == nil || got.Path != lib || got.Real != lib {
		t.Fatalf("libtcfoo.so: %+v, want found at %s; all: %v", got, lib, libNames(f))
	}
	if !hasLib(f, `libc\.so\.6`) {
		t.Errorf("no libc among %v", libNames(f))
	}
	if d := f.Dirs(); d[0] != filepath.Join(dir, "lib") {
		t.Errorf("Dirs() = %v, want the runpath's first", d)
	}
	os.Remove(lib)
	_, err = Find(exe)
	if err == nil || !strings.Contains(err.Error(), "libtcfoo.so") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Find without its library = %v, want an error naming libtcfoo.so", err)
	}
}

func TestLdCache(t *testing.T) {
	m, err := readLdCache(LdCache)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		t.Skipf("no %s here", LdCache)
	}
	paths := m["libc.so.6"]
	if len(paths) == 0 || !strings.HasSuffix(paths[0], "/libc.so.6") {
		t.Errorf("libc.so.6 in the cache: %v", paths)
	}
	if _, err := parseLdCache([]byte("glibc-ld.so.cache1.0 and then some more bytes........")); err == nil {
		t.Error("a cache in an unknown format was read")
	}
	if m, err := readLdCache(filepath.Join(t.TempDir(), "none")); err != nil || m != nil {
		t.Errorf("missing cache: %v %v, want empty", m, err)
	}
}

// TestFindThroughCacheOnly: the system libraries come from the loader's
// cache when no default directory is searched, and are not found without
// either.
func TestFindThroughCacheOnly(t *testing.T) {
	needClang(t)
	if _, err := (&Finder{Cache: LdCache}).Find(clang22); err != nil {
		t.Fatalf("through %s alone: %v", LdCache, err)
	}
	_, err := (&Finder{}).Find(clang22)
	if err == nil || !strings.Contains(err.Error(), "libstdc++.so.6") {
		t.Fatalf("with neither cache nor default directories: %v, want libstdc++.so.6 not found", err)
	}
}

// TestDynStringsAsDebugELF: the dynamic entries read without the whole
// string table are debug/elf's, for clang and every library it loads.
func TestDynStringsAsDebugELF(t *testing.T) {
	needClang(t)
	f, err := Find(clang22)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{f.Compiler, f.Loader}
	for _, l := range f.Libs {
		paths = append(paths, l.Real)
	}
	for _, p := range paths {
		obj, err := openELF(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range []elf.DynTag{elf.DT_NEEDED, elf.DT_RUNPATH, elf.DT_RPATH, elf.DT_SONAME} {
			got, err := obj.dyn(tag)
			want, _ := obj.File.DynString(tag)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s %v: %q (%v), debug/elf says %q", p, tag, got, err, want)
			}
		}
		obj.Close()
	}
}
