package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/cache"
)

// TestSettingsBeforeCommand: settings given before a command go to it
// (thindist --cache-dir D stats, thindist -q report --list), as they would
// after it; a word that is no command but an existing file is still the
// DTLTO entry point's job file, even one named like a command.
func TestSettingsBeforeCommand(t *testing.T) {
	dir := t.TempDir()
	run := writeRecord(t, dir)
	env := map[string]string{"HOME": t.TempDir()}
	code, out, errOut := runCLI(t, env, "--cache-dir", dir, "stats")
	if code != 0 || !strings.Contains(out, "Cache directory          "+dir) || !strings.Contains(out, "Runs                     1") {
		t.Errorf("--cache-dir D stats: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, errOut = runCLI(t, env, "-q", "--cache-dir="+dir, "report", "--list")
	if code != 0 || !strings.Contains(out, run.ID) {
		t.Errorf("-q --cache-dir=D report --list: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, errOut = runCLI(t, env, "--progress", "never", "--cache-dir", dir, "cache", "stats")
	if code != 0 || !strings.Contains(out, "directory:  "+dir) {
		t.Errorf("--progress never --cache-dir D cache stats: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, env, "-q", "help", "report")
	if code != 0 || !strings.Contains(out, "thindist report [last") {
		t.Errorf("-q help report: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, env, "--jobs=3", "config")
	if code != 0 || !strings.Contains(out, "jobs = 3 ") {
		t.Errorf("--jobs=3 config: exit %d\n%s", code, out)
	}
	// A file of that name is a job file (lld runs `thindist ARGS JOBFILE`).
	t.Chdir(t.TempDir())
	os.WriteFile("reprot", []byte("not json"), 0o644)
	code, _, errOut = runCLI(t, env, "--cache-dir", dir, "reprot")
	if code != 2 || strings.Contains(errOut, "unknown command") || !strings.Contains(errOut, "reprot") {
		t.Errorf("an existing file reprot: exit %d, stderr %q; want it read as a job file", code, errOut)
	}
}

// TestMisspeltCommand: a word that is neither a command nor a file, near a
// command's name, is said to be an unknown command with the one meant, and
// nothing runs (no cache directory made); so is a subcommand of server or
// cache.
func TestMisspeltCommand(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "cache")
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": cacheDir}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reprot"}, `thindist: unknown command "reprot"; did you mean "report"?`},
		{[]string{"-q", "stast"}, `thindist: unknown command "stast"; did you mean "stats"?`},
		{[]string{"--jobs", "2", "doctr"}, `thindist: unknown command "doctr"; did you mean "doctor"?`},
		{[]string{"server", "stat"}, `thindist server: unknown command "stat"; did you mean "status"?`},
		{[]string{"cache", "stat"}, `thindist cache: unknown command "stat"; did you mean "stats"?`},
		{[]string{"cache", "nonsense"}, `thindist cache: unknown command "nonsense"; it takes stats, clear, verify`},
		{[]string{"help", "reprot"}, `thindist help: unknown command "reprot"; did you mean "report"?`},
	} {
		code, _, errOut := runCLI(t, env, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(cacheDir); err == nil {
		t.Errorf("a misspelt command made the cache directory")
	}
}

// TestReadingCreatesNothing: stats, cache stats and report read a cache
// directory that does not exist as an empty one, and do not make it.
func TestReadingCreatesNothing(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	for _, args := range [][]string{
		{"--cache-dir", "D", "stats"}, {"stats", "--json", "--cache-dir", "D"}, {"cache", "stats", "--cache-dir", "D"},
		{"report", "--list", "--cache-dir", "D"},
	} {
		dir := filepath.Join(t.TempDir(), "none")
		for i := range args {
			if args[i] == "D" {
				args[i] = dir
			}
		}
		code, out, errOut := runCLI(t, env, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q\n%s", args, code, errOut, out)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v made the cache directory (%v)", args, err)
		}
	}
}

// TestReadOnlyCache: stats, cache stats and report read a cache on a
// read-only mount (root ignores permission bits, so the test mounts the
// directory read-only in a mount namespace of its own and runs
// TestReadOnlyCacheHelper there).
func TestReadOnlyCache(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil || os.Getuid() != 0 {
		t.Skip("needs root and unshare(1) for a read-only bind mount")
	}
	dir := t.TempDir()
	writeRecord(t, dir)
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := disk.AddStats(cache.Stats{Hits: 3, Misses: 4}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mount --bind -o ro "$1" "$1" && exec "$2" -test.run='^TestReadOnlyCacheHelper$' -test.v`,
		"sh", dir, os.Args[0])
	cmd.Env = append(os.Environ(), "THINDIST_TEST_READONLY_CACHE="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReadOnlyCacheHelper") {
		t.Errorf("on a read-only mount: %v\n%s", err, out)
	}
}

// TestReadOnlyCacheHelper runs the reading commands on the cache that
// TestReadOnlyCache mounted read-only.
func TestReadOnlyCacheHelper(t *testing.T) {
	dir := os.Getenv("THINDIST_TEST_READONLY_CACHE")
	if dir == "" {
		t.Skip("run by TestReadOnlyCache")
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err == nil {
		t.Fatalf("%s is writable: not the read-only mount", dir)
	}
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": dir}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stats"}, "Runs                     1"},
		{[]string{"cache", "stats"}, "hits:       3"},
		{[]string{"report", "--list"}, "/src/app"},
		{[]string{"report", "last"}, "/src/app"},
	} {
		code, out, errOut := runCLI(t, env, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q\n%s", c.args, code, errOut, out)
		}
	}
}

// TestDoctorDefaultCompiler: doctor without --compiler checks the clang
// the README's set-up installs when there is no clang on PATH (Debian's
// clang-22), and says what to pass when it finds none.
func TestDoctorDefaultCompiler(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/clang-22"); err != nil {
		t.Skip("needs Debian's clang-22")
	}
	if _, err := os.Stat("/usr/bin/clang"); err == nil {
		t.Skip("/usr/bin/clang exists: no PATH without clang to test with")
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": t.TempDir()}
	code, out, errOut := runCLI(t, env, "doctor", "--no-fork-server")
	if code != 0 || !strings.Contains(out, "ok    local compiler clang-22: ") || !strings.Contains(out, "all checks passed") {
		t.Errorf("doctor: exit %d, stderr %q\n%s", code, errOut, out)
	}
	_, err := defaultCompiler(func(string) (string, error) { return "", exec.ErrNotFound })
	if err == nil || !strings.Contains(err.Error(), "pass --compiler CLANG") {
		t.Errorf("no compiler found: %v; want what to pass", err)
	}
}
