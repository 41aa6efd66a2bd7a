package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/testprog"
)

// TestLinkSubcommand runs `thindist link` as the command line does.
func TestLinkSubcommand(t *testing.T) {
	clang := thinObjects(t)
	if code := Main(context.Background(), []string{"link", "-j", "2", "--progress=never", "--keep-native-objects", "kept",
		"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app"}); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if err := exec.Command("./app").Run(); err != nil {
		t.Fatalf("the linked program: %v", err)
	}
	for _, f := range []string{"kept/a.o", "kept/b.o"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("--keep-native-objects: %v", err)
		}
	}
	if code := Main(context.Background(), []string{"link", "--progress=never"}); code != 2 {
		t.Errorf("no link command: exit status %d, want 2", code)
	}
	if code := Main(context.Background(), []string{"link", "--progress=never", "--", clang, "-fuse-ld=lld", "missing.o", "-o", "x"}); code != 1 {
		t.Errorf("bad link: exit status %d, want 1", code)
	}
}

// thinObjects compiles a.o and b.o, a two-module ThinLTO program, in a
// fresh directory, makes it the working directory for the test, and
// returns the clang to link them with.
func thinObjects(t *testing.T) string {
	t.Helper()
	bin := testprog.LLVMBin()
	testprog.NeedLLVM(t, bin, "clang", "ld.lld")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int b(int);\nint main(void){ return b(2) == 6 ? 0 : 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.c"), []byte("int b(int x){ return x * 3; }\n"), 0o644)
	for _, f := range []string{"a", "b"} {
		cmd := exec.Command(filepath.Join(bin, "clang"), "-O2", "-flto=thin", "-c", f+".c", "-o", f+".o")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Chdir(dir)
	return filepath.Join(bin, "clang")
}
