package testprog

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
)

// BuildThindist builds cmd/thindist, and the thindist-link front beside it
// (as scripts/install.sh installs them), into dir and returns thindist's
// path, for tests that run thindist as lld runs it: as a separate program.
func BuildThindist(dir string) (string, error) {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/thindist/thindist/cmd/thindist", "github.com/thindist/thindist/cmd/thindist-link")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building thindist: %v\n%s", err, out)
	}
	return filepath.Join(dir, "thindist"), nil
}

// MainWithThindist is the TestMain of a package whose tests run thindist as
// a program: it builds thindist once into a fresh temporary directory
// (named with prefix), calls setup with the binary and that directory, runs
// the tests, removes the directory and exits with the tests' status.
func MainWithThindist(m *testing.M, prefix string, setup func(exe, tmp string)) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exe, err := BuildThindist(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(1)
	}
	setup(exe, tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// LLVMBin is the LLVM 22 bin directory the real-toolchain tests use:
// $THINDIST_E2E_LLVM, else Debian's.
func LLVMBin() string {
	if d := os.Getenv("THINDIST_E2E_LLVM"); d != "" {
		return d
	}
	return "/usr/lib/llvm-22/bin"
}

// NeedLLVM skips t unless bin holds every one of tools, and fails it
// instead when CI=true: CI installs the toolchain, so a skip there would
// hide a broken setup. A test that asks for a compiler or a linker (clang,
// clang++, ld.lld) compiles or links for real, and is in the full tier
// only: under -short it is skipped (testsupport.Slow).
func NeedLLVM(t testing.TB, bin string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		switch tool {
		case "clang", "clang++", "ld.lld":
			testsupport.Slow(t, "compiles or links with LLVM's "+strings.Join(tools, ", ")+" ("+bin+")")
		}
	}
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and the LLVM toolchain in %s is incomplete: %v", bin, err)
			}
			t.Skipf("LLVM not installed (%v); set THINDIST_E2E_LLVM to its bin directory", err)
		}
	}
}
