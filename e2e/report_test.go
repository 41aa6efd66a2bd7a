package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestTraceAndSummary links through thindist with --trace and checks the
// trace (valid JSON, one complete "X" event per job on a lane below --jobs,
// every clang forked from the fork server rather than exec'd) and the
// summary line.
func TestTraceAndSummary(t *testing.T) {
	t.Parallel()
	const modules, jobs = 12, 3
	p := program(t, testprog.Options{Modules: modules, Seed: 31, ArchiveModules: 2, ThinArchiveModules: 1})
	trace := filepath.Join(t.TempDir(), "trace dir", "run.json")
	if err := os.MkdirAll(filepath.Dir(trace), 0o777); err != nil {
		t.Fatal(err)
	}
	stderr := checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=3", "--trace=" + trace}})
	// The line names the output, and says how long lld worked before it
	// ran thindist and how long the backends took.
	if !regexp.MustCompile(`(?m)^thindist: \S*prog-dtlto: 12 jobs, 0 failed, 0 cached, 0 remote, 12 local in [0-9.]+m?s ` +
		`\(backends [0-9.]+m?s( including [0-9.]+m?s starting \d fork servers?)?(, other [0-9.]+m?s)?\), after lld's [0-9.]+m?s; slowest \S`).MatchString(stderr) {
		t.Errorf("no summary line for 12 jobs:\n%s", stderr)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			Pid  int     `json:"pid"`
			Tid  int     `json:"tid"`
			Args struct {
				Where  string `json:"where"`
				Forked bool   `json:"forked"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("the trace is not valid JSON: %v\n%s", err, data)
	}
	names := map[string]bool{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		if e.Tid < 0 || e.Tid >= jobs {
			t.Errorf("event %q on lane %d, want one below --jobs=%d", e.Name, e.Tid, jobs)
		}
		if e.Dur <= 0 || e.Ts < 0 {
			t.Errorf("event %q: ts %v dur %v", e.Name, e.Ts, e.Dur)
		}
		if names[e.Name] {
			t.Errorf("two events for %q", e.Name)
		}
		if e.Args.Where != "local" || !e.Args.Forked {
			t.Errorf("event %q: where %q, forked %v: want every backend forked locally", e.Name, e.Args.Where, e.Args.Forked)
		}
		names[e.Name] = true
	}
	if len(names) != modules {
		t.Errorf("%d complete events, want one per job (%d): %v", len(names), modules, names)
	}
	if !names["main.o"] {
		t.Errorf("no event for main.o: %v", names)
	}
	noLeftovers(t, p.Dir)

	// --quiet drops the summary.
	l := linkCmd{p: p, objs: p.Objects, out: "prog-quiet", dist: thindist, distArgs: []string{"--quiet"}}
	if out := l.mustLink(t); strings.Contains(out, "jobs,") {
		t.Errorf("--quiet printed a summary:\n%s", out)
	}
}

// TestHelp: --help names every flag and its environment variable.
func TestHelp(t *testing.T) {
	out, err := exec.Command(thindist, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("thindist --help: %v\n%s", err, out)
	}
	var cfg config.Config
	fs := config.NewFlagSet("thindist")
	cfg.Register(fs)
	names := fs.Names()
	if len(names) < 4 {
		t.Fatalf("only %d flags defined: %q", len(names), names)
	}
	for _, n := range names {
		if len(n) == 1 {
			if !strings.Contains(string(out), "-"+n+", --") {
				t.Errorf("--help does not show the short flag -%s", n)
			}
			continue
		}
		if !strings.Contains(string(out), "--"+n) {
			t.Errorf("--help does not mention --%s", n)
		}
		if !strings.Contains(string(out), config.EnvName(n)) {
			t.Errorf("--help does not mention %s", config.EnvName(n))
		}
	}
	// Flags also work from the environment: THINDIST_JOBS=0 is rejected
	// like --jobs=0, naming the variable.
	cmd := exec.Command(thindist, "job.json")
	cmd.Env = testEnv(t, "THINDIST_JOBS=0")
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "THINDIST_JOBS: bad value") {
		t.Errorf("THINDIST_JOBS=0: %v\n%s", err, b)
	}
}

// TestProgressTwoLinksOneTerminal runs two links at once in one terminal
// (a pty, through script(1)), each with a live progress line: each line
// names its output, and the links take turns at the line, one's lines
// all drawn before the other's, instead of overwriting each other's.
func TestProgressTwoLinksOneTerminal(t *testing.T) {
	t.Parallel()
	needClang(t)
	needTool(t, "script")
	p := program(t, testprog.Options{Modules: 8, Seed: 61})
	fake := fakeCompiler(t, t.TempDir())
	var links []string
	for _, out := range []string{"one", "two"} {
		args := []string{driver(p), "-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + thindist,
			"-Xthinlto-distributor=--jobs=2", "-Xthinlto-distributor=--no-cache", "-Xthinlto-distributor=--progress=always",
			"-Wl,--thinlto-remote-compiler=" + fake}
		args = append(append(args, p.Objects...), "-o", out)
		links = append(links, action.ShellQuote(args)+" &")
	}
	typescript := filepath.Join(t.TempDir(), "typescript")
	shell := "cd " + action.ShellQuote([]string{p.Dir}) + "\n" + strings.Join(links, "\n") + "\nwait\n"
	cmd := exec.Command("script", "-qec", shell, typescript)
	runtime := t.TempDir()
	cmd.Env = testEnv(t, "TD_SLEEP=0.2", "XDG_RUNTIME_DIR="+runtime)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	data, err := os.ReadFile(typescript)
	if err != nil {
		t.Fatal(err)
	}
	// The progress lines drawn, in order, by whose they are.
	var owners []string
	for _, seg := range strings.Split(string(data), "\r\x1b[K") {
		if m := regexp.MustCompile(`^thindist: (one|two): \d+/8 done`).FindStringSubmatch(seg); m != nil {
			if len(owners) == 0 || owners[len(owners)-1] != m[1] {
				owners = append(owners, m[1])
			}
		}
	}
	if len(owners) == 0 || len(owners) > 2 {
		t.Errorf("the progress lines on the terminal came from %v in turn, want one link's, then the other's:\n%q", owners, data)
	}
	for _, out := range []string{"one", "two"} {
		if !strings.Contains(string(data), "thindist: "+out+": 8 jobs, 0 failed") {
			t.Errorf("no summary line of %s:\n%q", out, data)
		}
	}
}
