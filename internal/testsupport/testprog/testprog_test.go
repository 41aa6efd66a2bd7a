package testprog

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var clang22 = filepath.Join(LLVMBin(), "clang")

func TestGenerateDeterministic(t *testing.T) {
	o := Options{Modules: 9, Seed: 3, ArchiveModules: 2, ThinArchiveModules: 2, Names: NonASCII}
	p1, err := Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Want != p2.Want {
		t.Errorf("same seed, different output: %q vs %q", p1.Want, p2.Want)
	}
	o.Seed = 4
	p3, err := Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Want == p1.Want {
		t.Errorf("different seeds, same output %q", p1.Want)
	}
	want := []string{"main.o", "m0.o", "dir with space/m1 x.o", "nested/a/b/m2(p).o", "sub/../m3.o", "libfoo.a", "libthin.a"}
	if strings.Join(p1.Objects, "|") != strings.Join(want, "|") {
		t.Errorf("Objects = %q, want %q", p1.Objects, want)
	}
	for _, m := range p1.Modules {
		if _, err := os.Stat(filepath.Join(p1.Dir, m.Source)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(p1.Dir, "sub")); err != nil {
		t.Errorf("the directory of the spelling sub/../m3.o: %v", err)
	}
	if _, err := Generate(t.TempDir(), Options{Modules: 3, ArchiveModules: 3}); err == nil {
		t.Error("more archive members than helper modules accepted")
	}
}

func TestGenerateMany(t *testing.T) {
	if _, err := Generate(t.TempDir(), Options{Modules: 600, CXX: true, Names: Tricky}); err != nil {
		t.Fatal(err)
	}
}

// TestRuns builds programs with in-process ThinLTO and checks that they print
// Want: the Go model of the program matches what the compiler makes of it.
func TestRuns(t *testing.T) {
	NeedLLVM(t, filepath.Dir(clang22), "clang")
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"c", Options{Modules: 8, Seed: 1, ArchiveModules: 2, ThinArchiveModules: 2, Names: Tricky}},
		{"cxx", Options{Modules: 8, Seed: 2, CXX: true, ArchiveModules: 1, ThinArchiveModules: 1, Names: Plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Generate(t.TempDir(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Compile(context.Background(), clang22); err != nil {
				t.Fatal(err)
			}
			driver := clang22
			if tc.o.CXX {
				driver += "++"
			}
			args := append([]string{"-flto=thin", "-fuse-ld=lld", "-O2", "-o", "prog"}, p.Objects...)
			cmd := exec.Command(driver, args...)
			cmd.Dir = p.Dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("link: %v\n%s", err, out)
			}
			out, err := exec.Command(filepath.Join(p.Dir, "prog")).Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != p.Want {
				t.Errorf("prints %q, want %q", out, p.Want)
			}
		})
	}
}
