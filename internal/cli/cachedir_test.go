package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplicitCacheDirUnusable: a cache directory the user named (flag,
// variable or config file) that cannot be used stops the link before
// anything runs, with exit status 2 and a message naming the directory; the
// default directory being unusable only warns.
func TestExplicitCacheDirUnusable(t *testing.T) {
	clang := thinObjects(t)
	blocker := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(blocker, nil, 0o644)
	bad := filepath.Join(blocker, "cache") // under a regular file: cannot be created
	conf := filepath.Join(t.TempDir(), "conf")
	os.WriteFile(conf, []byte("cache-dir = "+bad+"\n"), 0o644)
	home := t.TempDir()
	link := []string{"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app"}
	for _, c := range []struct {
		name  string
		flags []string
		env   map[string]string
		from  string
	}{
		{"flag", []string{"--cache-dir=" + bad}, nil, "flag --cache-dir"},
		{"environment", nil, map[string]string{"THINDIST_CACHE_DIR": bad}, "environment THINDIST_CACHE_DIR"},
		{"config file", []string{"--config=" + conf}, nil, "file " + conf},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range c.env {
				env[k] = v
			}
			args := append(append([]string{"link", "--progress=never"}, c.flags...), link...)
			code, _, errOut := runCLI(t, env, args...)
			if code != 2 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "not a directory") ||
				!strings.Contains(errOut, c.from) {
				t.Errorf("exit %d, stderr %q; want 2 and a message naming %s, why, and %s", code, errOut, bad, c.from)
			}
			for _, p := range []string{"app", "app.thindist.d"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s exists: the link ran", p)
				}
			}
			// The DTLTO entry point stops as early.
			code, _, errOut = runCLI(t, env, append(append([]string{"--progress=never"}, c.flags...), "job.json")...)
			if code != 2 || !strings.Contains(errOut, bad) {
				t.Errorf("distributor: exit %d, stderr %q", code, errOut)
			}
		})
	}
	t.Run("default", func(t *testing.T) {
		env := map[string]string{"HOME": home, "XDG_CACHE_HOME": bad, "THINDIST_IN_PROCESS_BELOW": "0"}
		code, _, errOut := runCLI(t, env, append([]string{"link", "--progress=never"}, link...)...)
		if code != 0 || !strings.Contains(errOut, "warning: running without a cache") || !strings.Contains(errOut, bad) {
			t.Errorf("exit %d, stderr %q; want a warning and a linked program", code, errOut)
		}
		if _, err := os.Stat("app"); err != nil {
			t.Error(err)
		}
	})
}
