package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
)

// writeRecord keeps one run's record in cacheDir's store.
func writeRecord(t *testing.T, cacheDir string) *record.Run {
	t.Helper()
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	run := &record.Run{Schema: record.Schema, ID: record.NewID(start, 42), Version: "test", Entry: "dtlto",
		Output: "/src/app", Start: start, End: start.Add(2 * time.Second), Jobs: 2}
	store := record.Open(cacheDir)
	if err := store.Write(run); err != nil {
		t.Fatal(err)
	}
	if err := store.AddTotals(run); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestReportFlagsAnywhere: `thindist report last --json` and
// `report last --html FILE`, as --help orders them, work; --html - and a
// bare --html write the page to stdout; --list --json prints JSON.
func TestReportFlagsAnywhere(t *testing.T) {
	dir := t.TempDir()
	run := writeRecord(t, dir)
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": dir}
	code, out, errOut := runCLI(t, env, "report", "last", "--json")
	var got record.Run
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.ID != run.ID {
		t.Errorf("report last --json: exit %d, stderr %q, stdout %.200q", code, errOut, out)
	}
	page := filepath.Join(t.TempDir(), "run.html")
	code, _, errOut = runCLI(t, env, "report", "last", "--html", page)
	if b, err := os.ReadFile(page); code != 0 || err != nil || !strings.Contains(string(b), "<html") {
		t.Errorf("report last --html FILE: exit %d, stderr %q, %v", code, errOut, err)
	}
	for _, args := range [][]string{{"report", "last", "--html", "-"}, {"report", "--html"}, {"report", "--html", "--cache-dir", dir}} {
		code, out, errOut := runCLI(t, env, args...)
		if code != 0 || !strings.Contains(out, "<html") {
			t.Errorf("%v: exit %d, stderr %q, stdout %.100q; want the page on stdout", args, code, errOut, out)
		}
	}
	code, out, errOut = runCLI(t, env, "report", "--list", "--json")
	var list []struct {
		ID     string `json:"id"`
		Output string `json:"output"`
		WallMS int64  `json:"wall_ms"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != run.ID ||
		list[0].Output != "/src/app" || list[0].WallMS != 2000 {
		t.Errorf("report --list --json: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if code, _, errOut := runCLI(t, env, "report", "last", "last~1"); code != 2 || !strings.Contains(errOut, "one run at a time") {
		t.Errorf("two runs: exit %d, %q", code, errOut)
	}
}

// TestCommandFlagsNotSettings: THINDIST_ZERO and THINDIST_JSON are not
// read: stats --zero and --json are the command's, given on its line.
func TestCommandFlagsNotSettings(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir)
	env := map[string]string{"HOME": t.TempDir(), "THINDIST_CACHE_DIR": dir, "THINDIST_ZERO": "1", "THINDIST_JSON": "1"}
	code, out, errOut := runCLI(t, env, "stats")
	if code != 0 || !strings.Contains(out, "Runs                     1") || strings.HasPrefix(out, "{") {
		t.Errorf("stats with THINDIST_ZERO=1 THINDIST_JSON=1: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, env, "report", "--list")
	if code != 0 || strings.HasPrefix(out, "[") {
		t.Errorf("report --list with THINDIST_JSON=1 printed JSON:\n%s", out)
	}
	code, out, _ = runCLI(t, env, "stats", "--json")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("stats --json: exit %d\n%s", code, out)
	}
}

// TestCommandHelpIsShort: a command's help shows its own flags and points
// to the shared settings instead of repeating them; doctor says what it
// checks; help settings lists them.
func TestCommandHelpIsShort(t *testing.T) {
	for _, c := range []struct {
		topic, own string
	}{{"stats", "--zero"}, {"doctor", "--compiler"}, {"report", "--html"}, {"link", "--compdb"}, {"cache", "verify"}, {"config", "thindist config"}} {
		code, out, _ := runCLI(t, nil, "help", c.topic)
		lines := strings.Count(out, "\n")
		if code != 0 || !strings.Contains(out, c.own) || strings.Contains(out, "--remote-instance") ||
			!strings.Contains(out, "thindist help settings") || lines > 60 {
			t.Errorf("help %s: exit %d, %d lines; want its own flags (%s) and a pointer to 'thindist help settings':\n%s",
				c.topic, code, lines, c.own, out)
		}
	}
	if _, out, _ := runCLI(t, nil, "help", "doctor"); !strings.Contains(out, "workers' compiler reports the same version") {
		t.Errorf("help doctor does not say what doctor checks:\n%s", out)
	}
	if code, out, _ := runCLI(t, nil, "help", "settings"); code != 0 || !strings.Contains(out, "THINDIST_REMOTE_INSTANCE") || strings.Contains(out, "--zero") {
		t.Errorf("help settings: exit %d\n%.300s", code, out)
	}
}

// TestConfigTypoWarns: a typo in the config file warns (file, line, the
// setting meant) and the command goes on; the same typo as a flag still
// stops it with exit 2 and the suggestion.
func TestConfigTypoWarns(t *testing.T) {
	xdg := t.TempDir()
	file := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("jobs = 3\ncache-sise = 1G\n"), 0o644)
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": t.TempDir()}
	code, out, errOut := runCLI(t, env, "config")
	if code != 0 || !strings.Contains(out, "jobs = 3 ") ||
		!strings.Contains(errOut, "warning: "+file+`:2: unknown setting "cache-sise" (did you mean cache-size?)`) {
		t.Errorf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, _, errOut = runCLI(t, env, "config", "--cache-sise=1G")
	if code != 2 || !strings.Contains(errOut, "unknown flag --cache-sise (did you mean --cache-size?)") {
		t.Errorf("--cache-sise: exit %d, %q", code, errOut)
	}
}

// TestConfigShowsMeaning: a placeholder default is spelled out.
func TestConfigShowsMeaning(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	code, out, _ := runCLI(t, env, "config", "--jobs=5")
	if code != 0 || !strings.Contains(out, "remote-local-jobs = -1 (the value of --jobs: 5)") {
		t.Errorf("exit %d\n%s", code, out)
	}
}
