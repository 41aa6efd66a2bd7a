package bitcode

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestReadModuleInfo compares ReadModuleInfo and ReadTriple with what
// llvm-dis prints for modules compiled with each relocation model, for two
// targets, with and without debug information (which fills the metadata
// block).
func TestReadModuleInfo(t *testing.T) {
	testprog.NeedLLVM(t, llvmBin, "clang", "llvm-dis")
	dir := t.TempDir()
	src := filepath.Join(dir, "m.c")
	os.WriteFile(src, []byte("int g;\nstatic int h(int x) { return x * g; }\nint f(int x) { return h(x) + 1; }\n"), 0o644)
	tripleRE := regexp.MustCompile(`(?m)^target triple = "([^"]*)"`)
	n := 0
	for _, target := range []string{"x86_64-pc-linux-gnu", "x86_64-unknown-linux-gnu", "i686-linux-gnu"} {
		for _, model := range []string{"-fpic", "-fPIC", "-fpie", "-fno-pic"} {
			for _, debug := range []string{"-g0", "-g"} {
				n++
				obj := filepath.Join(dir, strings.TrimLeft(target+model+debug, "-")+".o")
				out, err := exec.Command(filepath.Join(llvmBin, "clang"), "--target="+target, "-O2", "-flto=thin",
					model, debug, "-c", src, "-o", obj).CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				ir, err := exec.Command(filepath.Join(llvmBin, "llvm-dis"), obj, "-o", "-").Output()
				if err != nil {
					t.Fatal(err)
				}
				m := tripleRE.FindSubmatch(ir)
				if m == nil {
					t.Fatalf("%s: llvm-dis prints no target triple", obj)
				}
				want := ModuleInfo{Triple: string(m[1]), PIC: strings.Contains(string(ir), `!"PIC Level", i32`)}
				data, err := os.ReadFile(obj)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ReadModuleInfo(data)
				if err != nil {
					t.Fatalf("%s: %v", obj, err)
				}
				if got != want {
					t.Errorf("%s %s %s: ReadModuleInfo = %+v, llvm-dis says %+v", target, model, debug, got, want)
				}
				if triple, err := ReadTriple(data); triple != want.Triple || err != nil {
					t.Errorf("%s %s %s: ReadTriple = %q, %v; llvm-dis says %q", target, model, debug, triple, err, want.Triple)
				}
			}
		}
	}
	if _, err := ReadModuleInfo([]byte("BC\xc0\xde")); err == nil {
		t.Errorf("a bitcode file without a module: no error")
	}
}
