package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/pipeline"
)

// runCLI runs thindist's command line with environment env and returns
// its exit status, stdout and stderr.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := pipeline.Env{Stderr: &stderr, Getenv: func(k string) string { return env[k] }, Environ: func() []string {
		var l []string
		for k, v := range env {
			l = append(l, k+"="+v)
		}
		return l
	}}
	code := run(context.Background(), args, e, &stdout)
	return code, stdout.String(), stderr.String()
}

func TestVersionAndHelp(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"link", "--version"}} {
		code, out, _ := runCLI(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "thindist ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: exit %d, %q; want thindist's and Go's versions", args, code, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string // in the help, and not in the general help
	}{
		{[]string{"help", "link"}, "thindist link [flags] --"},
		{[]string{"help", "cache"}, "thindist cache stats"},
		{[]string{"cache", "--help"}, "thindist cache stats"},
		{[]string{"help", "config"}, "thindist config [flags]"},
		{[]string{"config", "--help"}, "thindist config [flags]"},
		{[]string{"help", "doctor"}, "thindist doctor [--compiler"},
		{[]string{"help", "server"}, "thindist server status [--json]"},
		{[]string{"server", "--help"}, "thindist server stop"},
	} {
		code, out, errOut := runCLI(t, nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) || strings.Contains(out, "As lld's DTLTO distributor") {
			t.Errorf("%v: exit %d, stdout %.200q, stderr %q; want its own help", c.args, code, out, errOut)
		}
	}
	if code, _, _ := runCLI(t, nil, "help", "nonsense"); code != 2 {
		t.Errorf("help for an unknown command: exit %d, want 2", code)
	}
}

// TestFlagErrorsExit2 checks what a user sees for a bad flag value: the
// flag with two dashes, what is expected, exit status 2, nothing run.
func TestFlagErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"--jobs=abc", "job.json"}, {"link", "--jobs=abc", "--", "clang"}, {"cache", "stats", "--jobs=abc"}} {
		code, _, errOut := runCLI(t, nil, args...)
		if code != 2 || !strings.Contains(errOut, `--jobs: bad value "abc" (want a number of at least 1)`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestConfigCommand checks that `thindist config` shows each setting's
// value and where it came from.
func TestConfigCommand(t *testing.T) {
	xdg := t.TempDir()
	file := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("cache-size = 2G\nremote = grpc://file:1\nremote-header = x-api-key=SECRET\n"), 0o644)
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "THINDIST_REMOTE_INSTANCE": "envinst", "HOME": t.TempDir()}
	code, out, errOut := runCLI(t, env, "config", "--jobs=3", "--remote_executor=grpc://flag:1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"# default config file: " + file + " (read)",
		"jobs = 3 ", "# flag --jobs",
		"cache-size = 2G ", "# file " + file,
		"remote = grpc://flag:1 ", "# flag --remote_executor",
		"remote-instance = envinst ", "# environment THINDIST_REMOTE_INSTANCE",
		"remote-header = x-api-key=<redacted>",
		"quiet = false ", "# default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("config output shows a header's value:\n%s", out)
	}
}
