package thinlink_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
)

// levelSources are modules whose loops compile differently at -O1, -O2 and
// -O3 (unrolled, vectorised or not), so a wrong LTO level shows in the code.
func levelSources() map[string]string {
	src := map[string]string{
		"main.c": "int f1(int),f2(int),f3(int),f4(int);\n" +
			"int main(int c,char**v){(void)v; return (f1(c*100)+f2(c*90)+f3(c)+f4(c))&1;}\n",
	}
	for i := 1; i <= 4; i++ {
		src[fmt.Sprintf("m%d.c", i)] = fmt.Sprintf("static int g%[1]d[64];\n"+
			"int f%[1]d(int n){int s=0; for(int i=0;i<n;i++){ g%[1]d[i&63]+=i; s+=g%[1]d[(i*7)&63]*i;} return s;}\n", i)
	}
	return src
}

// TestLTOLevelAsLLD: every way of spelling the LTO level and the linker's
// own -O level gives the binary lld's in-process ThinLTO gives, byte for
// byte, on LLVM 19 (separate thin link) and 22 (one lld). The linker's
// -O<n> (-Wl,-O1: Meson's release default) is lld's optimization of the
// link, not the LTO level; --lto-O<n> and --plugin-opt=O<n> are, and win
// over the driver's -O.
func TestLTOLevelAsLLD(t *testing.T) {
	testsupport.Slow(t, "links each spelling twice with two LLVM versions")
	spellings := [][]string{
		{"-Wl,-O1"},
		{"-Wl,-O1,--as-needed,-z,relro"},
		{"-Xlinker", "-O1"},
		{"-Wl,-O3"},
		{"-Wl,-O0"},
		{"-Wl,--lto-O1"},
		{"-Wl,--plugin-opt=O1"},
		{"-Wl,-plugin-opt=O3"},
		{"-Wl,--plugin-opt,O1"},
		{"-Xlinker", "-plugin-opt", "-Xlinker", "O3"},
		{"-Wl,--lto-O3"},
		{"-O1"},
		{"-Og"},
		{"-O"},
		{"-O3"},
		{"-Os"},
		{"-Oz"},
		{"-Ofast"},
		{"-O3", "-Wl,--lto-O2"},
		{"-O1", "-Wl,-O2"},
		{"-O2", "-Wl,-O1,--lto-O1"},
		{"-O0", "-Wl,--lto-CGO0"},
		{"-Wl,--lto-O3,--lto-CGO3"},
	}
	for _, tc := range toolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &project{dir: t.TempDir(), tc: tc, cache: t.TempDir()}
			var objs []string
			for name, text := range levelSources() {
				os.WriteFile(filepath.Join(p.dir, name), []byte(text), 0o644)
				obj := strings.TrimSuffix(name, ".c") + ".o"
				run(t, p.dir, nil, tc.tool("clang"), "-O2", "-flto=thin", "-c", name, "-o", obj)
				objs = append(objs, obj)
			}
			// Each link is made twice: in-process, keeping its native objects,
			// and through thindist link, keeping its own; the objects must be
			// the same, and with LLVM 22 (one lld, which also links) the
			// outputs too (a separate thin link names the objects otherwise
			// in the symbol table). lto is the option that keeps in-process
			// objects.
			check := func(tag string, cmd []string, lto func(string) []string, wholeFile bool) {
				t.Helper()
				ref := "ref-" + tag
				os.MkdirAll(filepath.Join(p.dir, ref), 0o755)
				withOut := func(out string) []string {
					return append(append(slices.Clone(cmd), objs...), "-o", out)
				}
				run(t, p.dir, nil, append(withOut(ref+"/out"), lto(ref+"/lto")...)...)
				res := p.mustLink(t, withOut("td-"+tag), keepKept)
				t.Run(tag, func(t *testing.T) { sameAsInProcess(t, p, ref, res) })
				if !wholeFile {
					return
				}
				// --lto-obj-path names the objects in the symbol table: the
				// binary to compare is a link of its own.
				run(t, p.dir, nil, withOut("ip-"+tag)...)
				a, _ := os.ReadFile(filepath.Join(p.dir, "ip-"+tag))
				b, _ := os.ReadFile(filepath.Join(p.dir, "td-"+tag))
				if !bytes.Equal(a, b) {
					t.Errorf("%q: thindist link's output (%d bytes) differs from lld in-process's (%d bytes)", cmd, len(b), len(a))
				}
			}
			oneLLD := tc.name == "llvm-22"
			for i, sp := range spellings {
				cmd := append([]string{tc.tool("clang"), "-flto=thin", "-fuse-ld=lld"}, sp...)
				check(fmt.Sprintf("driver%d", i), cmd, driverLTO, oneLLD)
			}
			// ld.lld itself: its -O1 is no LTO level, its --lto-O1 is.
			for i, sp := range [][]string{{"-O1"}, {"--lto-O1"}, {"-O2", "--plugin-opt=O3"}} {
				cmd := append([]string{tc.tool("ld.lld"), "-r"}, sp...)
				check(fmt.Sprintf("lld%d", i), cmd, lldLTO, oneLLD)
			}
		})
	}
}
