package forkserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestPreinit: the server calls the LLVM target initialisers that the
// executable imports, once, before any job; a job still makes its own calls
// (which find the work done); other functions of the same family are left
// to the program.
func TestPreinit(t *testing.T) {
	clang := filepath.Join(llvmBin, "clang")
	so := shim(t)
	dir := t.TempDir()
	// A stand-in for libLLVM: each initialiser counts its calls and notes
	// which process made the first.
	lib := `#include <unistd.h>
int info_calls, info_first, mca_calls;
void LLVMInitializeFakeTargetInfo(void) { if (!info_calls++) info_first = getpid(); }
void LLVMInitializeFakeTargetMCA(void) { mca_calls++; }
`
	prog := `#include <stdio.h>
#include <unistd.h>
extern int info_calls, info_first, mca_calls;
void LLVMInitializeFakeTargetInfo(void);
void LLVMInitializeFakeTargetMCA(void);
int main(void) {
	LLVMInitializeFakeTargetInfo();
	LLVMInitializeFakeTargetMCA();
	printf("%d %s %d\n", info_calls, info_first == getpid() ? "self" : "other", mca_calls);
	return 0;
}
`
	for name, src := range map[string]string{"fake.c": lib, "prog.c": prog} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", "libfake.so", "fake.c"},
		{"-o", "prog", "prog.c", "-L.", "-lfake", "-Wl,-rpath," + dir},
	} {
		cmd := exec.Command(clang, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("clang %v: %v\n%s", args, err, out)
		}
	}
	prog = filepath.Join(dir, "prog")
	if got := initialisers(prog); !slices.Equal(got, []string{"LLVMInitializeFakeTargetInfo"}) {
		t.Errorf("initialisers %q", got)
	}
	if got := initialisers("/bin/sh"); len(got) != 0 {
		t.Errorf("/bin/sh: initialisers %q", got)
	}

	out, err := exec.Command(prog).Output()
	if err != nil || string(out) != "1 self 1\n" {
		t.Fatalf("exec'd: %q %v", out, err)
	}
	s, err := Start(t.Context(), prog, so, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		st, out, errOut, err := run(t, s, t.Context(), dir, prog)
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("job %d: %+v %v %s", i, st, err, errOut)
		}
		if want := "2 other 1\n"; out != want {
			t.Errorf("job %d: %q, want %q (the server's call, the job's own; MCA is not a layer clang registers)", i, out, want)
		}
	}
}

// TestClangTargetsAsExeced: a forked clang, whose server registered the
// targets before main, knows the same targets as an exec'd one.
func TestClangTargetsAsExeced(t *testing.T) {
	clang := filepath.Join(llvmBin, "clang")
	s := start(t, clang)
	if len(initialisers(clang)) == 0 {
		t.Errorf("%s imports no LLVM target initialiser: the server pre-initialises nothing", clang)
	}
	want, err := exec.Command(clang, "-print-targets").Output()
	if err != nil {
		t.Fatal(err)
	}
	st, got, errOut, err := run(t, s, t.Context(), "/", clang, "-print-targets")
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("%+v %v %s", st, err, errOut)
	}
	if got != string(want) || got == "" {
		t.Errorf("forked:\n%s\nexec'd:\n%s", got, want)
	}
}
