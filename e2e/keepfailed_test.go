package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFailedJobCanBeRerun: a failed backend's error names a script that
// runs its command again on kept copies of its inputs (lld deletes the
// index shards and its copies of archive members): the script fails as
// the backend did, and without the bad option it compiles, its imports
// found. The next good link of the output removes the copies.
func TestFailedJobCanBeRerun(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	link := func(flags ...string) (string, error) {
		return dtltoRun(t, dir, cache, append([]string{"main.o", "libutil.a", "-o", "app"}, flags...)...)
	}
	const bogus = "-thindist-no-such-option"
	out, err := link("-Wl,--thinlto-remote-compiler-arg=-mllvm,--thinlto-remote-compiler-arg=" + bogus)
	if err == nil {
		t.Fatalf("the link succeeded with a bad backend option:\n%s", out)
	}
	scripts := regexp.MustCompile(`to run it again: (\S+/rerun\.sh)`).FindAllStringSubmatch(out, -1)
	if len(scripts) != 2 {
		t.Fatalf("want a rerun script for each of the 2 failed jobs:\n%s", out)
	}
	for _, m := range scripts {
		script := m[1]
		if fi, err := os.Stat(filepath.Dir(script)); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v: want a directory only its owner reads", script, err, fi.Mode())
		}
		b, err := exec.Command(script).CombinedOutput()
		if err == nil || !strings.Contains(string(b), bogus) {
			t.Errorf("%s: %v, want the backend's failure again:\n%s", script, err, b)
		}
		text, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		fixed := strings.ReplaceAll(string(text), " -mllvm "+bogus, "")
		if err := os.WriteFile(script, []byte(fixed), 0o700); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(script).CombinedOutput(); err != nil || len(b) > 0 {
			t.Errorf("%s without %s: %v\n%s\n%s", script, bogus, err, b, fixed)
		}
		if fi, err := os.Stat(filepath.Join(filepath.Dir(script), "out", "0.o")); err != nil || fi.Size() == 0 {
			t.Errorf("%s wrote no object: %v", script, err)
		}
	}
	if out, err := link(); err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	for _, m := range scripts {
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Errorf("%s is still there after a good link of the output", m[1])
		}
	}
}
