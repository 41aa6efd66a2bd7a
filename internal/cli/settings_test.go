package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLinkSettingsKnown: thindist link's settings (in-process-below) in the
// config file every command reads are no "unknown setting" for the DTLTO
// entry point, `stats` or `config`, and `thindist config` lists every one
// of them with its value and source; a bad value of one is named with its
// file and line by every command.
func TestLinkSettingsKnown(t *testing.T) {
	xdg := t.TempDir()
	file := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("in-process-below = 1M\nseparate-thin-link\n"), 0o644)
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": t.TempDir(), "THINDIST_CACHE_DIR": t.TempDir(),
		"THINDIST_COMPDB": "cc.json"}
	code, out, errOut := runCLI(t, env, "config")
	if code != 0 || errOut != "" {
		t.Errorf("config: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"in-process-below = 1M ", "# file " + file,
		"separate-thin-link = true ", "compdb = cc.json ", "# environment THINDIST_COMPDB",
		"sections-as-compiled = false ", "keep-native-objects = ", "keep-work-dir = false ",
		"work-dir = ", "compiler = ", "verbose = false ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("thindist config does not show %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"stats"}, {"--progress=never", "no-such-job.json"}, {"cache", "stats"}} {
		_, _, errOut := runCLI(t, env, args...)
		if strings.Contains(errOut, "unknown setting") || strings.Contains(errOut, "warning") {
			t.Errorf("%v: stderr %q; want no warning about the link's settings", args, errOut)
		}
	}
	os.WriteFile(file, []byte("jobs = 2\nin-process-below = lots\n"), 0o644)
	for _, args := range [][]string{{"config"}, {"stats"}} {
		code, _, errOut := runCLI(t, env, args...)
		if code != 0 || !strings.Contains(errOut, file+`:2: in-process-below: bad value "lots" (want a size`) {
			t.Errorf("%v with a bad in-process-below: exit %d, stderr %q", args, code, errOut)
		}
	}
	code, _, errOut = runCLI(t, env, "--in-process-below=1M", "job.json")
	if code != 2 || !strings.Contains(errOut, "--in-process-below is a setting of 'thindist link'") {
		t.Errorf("--in-process-below for the DTLTO entry point: exit %d, %q", code, errOut)
	}
}

// TestMisspeltVariableWarns: a THINDIST_* variable no setting reads gets a
// warning with the one meant, and the command goes on.
func TestMisspeltVariableWarns(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_JBOS": "3", "THINDIST_CACHE_DIR": t.TempDir()}
	code, out, errOut := runCLI(t, env, "config")
	if code != 0 || !strings.Contains(errOut, "warning: THINDIST_JBOS is no setting's variable (did you mean THINDIST_JOBS?)") ||
		strings.Contains(out, "jobs = 3 ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestEveryVariableOfTheTreeIsKnown: every THINDIST_* name the tree's
// programs, scripts and documents use (not its tests: those may set a
// command's option, THINDIST_ZERO, to see it ignored) is a setting's or
// one CheckEnviron knows as thindist's, its scripts' or its tests': none
// of them draws the warning about a misspelt variable.
func TestEveryVariableOfTheTreeIsKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`THINDIST_[A-Z0-9_]+`)
	notVariables := map[string]bool{
		"THINDIST_DTLTO_PLUGIN_H": true, // plugin/dtlto_plugin.h's include guard
		"THINDIST_X":              true, // config's doc comment's placeholder
		"THINDIST_JBOS":           true, // the misspelling CheckEnviron's doc shows
		"THINDIST_ZERO":           true, // the command's option CheckEnviron's doc shows
	}
	found := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".sh", ".md", ".c", ".cc", ".cpp", ".h", ".yml", ".yaml", "":
		default:
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			for _, n := range name.FindAllString(sc.Text(), -1) {
				// A name ending in _ begins a family (config's otherVariables).
				if !notVariables[n] && !strings.HasSuffix(n, "_") {
					found[n] = p
				}
			}
		}
		return nil
	})
	if len(found) < 10 {
		t.Fatalf("found only %d THINDIST_ names under %s: %v", len(found), root, found)
	}
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": t.TempDir()}
	for n := range found {
		if n != "THINDIST_CACHE_DIR" {
			env[n] = "1"
		}
	}
	_, _, errOut := runCLI(t, env, "stats")
	for _, line := range strings.Split(errOut, "\n") {
		if strings.Contains(line, "variable") {
			n, _, _ := strings.Cut(strings.TrimPrefix(line, "thindist stats: warning: "), " ")
			t.Errorf("%s (used in %s): %s", n, found[strings.TrimSuffix(n, ":")], line)
		}
	}
}
