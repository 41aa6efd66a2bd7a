package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkFailureNamesRerunScript: a `thindist link` whose backend fails
// names the script that runs it again on kept inputs, and does not also
// send the user to --keep-work-dir for what that script already does.
func TestLinkFailureNamesRerunScript(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	// Inline assembly is only assembled by the backend: the bitcode
	// compiles, the backend fails.
	src := "int main(void) { __asm__(\"thindist_no_such_instruction\"); return 0; }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := exec.Command(clang, "-O2", "-flto=thin", "-c", "main.c", "-o", "main.o")
	cc.Dir = dir
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	code, out := runThindist(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "link", "--",
		clang, "-flto=thin", "-fuse-ld=lld", "main.o", "-o", "app")
	if code == 0 {
		t.Fatalf("the link succeeded with a bad backend option:\n%s", out)
	}
	if !strings.Contains(out, "rerun.sh") {
		t.Errorf("no rerun script named:\n%s", out)
	}
	if strings.Contains(out, "--keep-work-dir") {
		t.Errorf("still points at --keep-work-dir beside the rerun script:\n%s", out)
	}
}
