package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadValuesEverySource: a value a setting cannot take is refused the
// same way whichever source gives it: on the command line and in the
// environment it stops the command naming the flag or the variable; in a
// config file it is a warning naming the file and line, and the line is
// ignored (the setting keeps its default) so that the command still runs.
// Settings whose values were taken unchecked (a choice, a size, an
// address) or checked only with a remote service are among them.
func TestBadValuesEverySource(t *testing.T) {
	for _, c := range []struct {
		name, value, want string
		get               func(*Config) string
	}{
		{"progress", "sometimes", "auto, always or never", func(c *Config) string { return c.Progress }},
		{"cache-size", "lots", "a size such as 500M or 10G", func(c *Config) string { return c.CacheSize }},
		{"remote", "http://x", "grpc://HOST:PORT or grpcs://HOST:PORT", func(c *Config) string { return c.Remote.Target }},
		{"remote-fallback", "maybe", "local or none", func(c *Config) string { return c.Remote.Fallback }},
		{"remote-compress", "fast", "auto, downloads, all or none", func(c *Config) string { return c.Remote.Compress }},
		{"jobs", "0", "a number of at least 1", func(c *Config) string { return fmt.Sprint(c.Jobs) }},
		{"remote-retries", "0", "a number of at least 1", func(c *Config) string { return fmt.Sprint(c.Remote.Attempts) }},
		{"remote-group", "-2", "a number of at least 0", func(c *Config) string { return fmt.Sprint(c.Remote.Group) }},
		{"remote-timeout", "-5s", "a duration such as 30s", func(c *Config) string { return c.Remote.Timeout.String() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := fmt.Sprintf("bad value %q (want %s", c.value, c.want)
			def, _, err := parse(t, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = parse(t, []string{"--" + c.name + "=" + c.value}, nil)
			if err == nil || !strings.HasPrefix(err.Error(), "--"+c.name+": "+bad) {
				t.Errorf("flag: error %v, want it to start with %q", err, "--"+c.name+": "+bad)
			}
			_, _, err = parse(t, nil, map[string]string{EnvName(c.name): c.value})
			if err == nil || !strings.HasPrefix(err.Error(), EnvName(c.name)+": "+bad) {
				t.Errorf("environment: error %v, want it to start with %q", err, EnvName(c.name)+": "+bad)
			}
			file := filepath.Join(t.TempDir(), "conf")
			os.WriteFile(file, []byte("# a comment\n"+c.name+" = "+c.value+"\n"), 0o644)
			cfg, fs, err := parse(t, []string{"--config=" + file}, nil)
			if err == nil {
				err = cfg.Check()
			}
			want := fmt.Sprintf("%s:2: %s: %s", file, c.name, bad)
			if w := fs.Warnings(); err != nil || len(w) != 1 || !strings.HasPrefix(w[0], want) || !strings.HasSuffix(w[0], "; line ignored") {
				t.Errorf("file: error %v, warnings %q; want no error and one warning starting %q", err, w, want)
			}
			if got := c.get(cfg); got != c.get(def) {
				t.Errorf("file: %s = %q after the bad line, want the default %q", c.name, got, c.get(def))
			}
		})
	}
}

// linkSet is a stand-in for thindist link's set: a setting of its own
// besides the shared ones.
func linkSet() *FlagSet {
	var cfg Config
	var below string
	fs := NewFlagSet("thindist link")
	fs.Size(&below, "in-process-below", "Link", "256K", "leave small links to lld")
	cfg.Register(fs)
	return fs
}

// TestKnownSettingsOfAnotherCommand: a setting of another command (thindist
// link's in-process-below, in a config file every command reads or in the
// environment) is no unknown setting where it does not apply, and its
// value is checked there too; given on the command line of a command it
// does not apply to, the error names the command it belongs to.
func TestKnownSettingsOfAnotherCommand(t *testing.T) {
	newSet := func() *FlagSet {
		var cfg Config
		fs := NewFlagSet("thindist")
		cfg.Register(fs)
		fs.Know(linkSet())
		return fs
	}
	file := filepath.Join(t.TempDir(), "conf")
	os.WriteFile(file, []byte("in-process-below = 1M\njobs = 2\n"), 0o644)
	env := map[string]string{"THINDIST_CONFIG": file, "THINDIST_IN_PROCESS_BELOW": "2M"}
	fs := newSet()
	if err := fs.Parse(nil, func(k string) string { return env[k] }); err != nil || len(fs.Warnings()) != 0 {
		t.Errorf("in-process-below in a file and the environment: %v, warnings %q; want neither", err, fs.Warnings())
	}
	os.WriteFile(file, []byte("in-process-below = lots\nin-proces-below = 1M\n"), 0o644)
	fs = newSet()
	err := fs.Parse(nil, func(k string) string { return map[string]string{"THINDIST_CONFIG": file}[k] })
	if w := fs.Warnings(); err != nil || len(w) != 2 || !strings.HasPrefix(w[0], file+`:1: in-process-below: bad value "lots"`) ||
		!strings.Contains(w[1], `(did you mean in-process-below?)`) {
		t.Errorf("bad lines: %v, warnings %q", err, w)
	}
	if err := newSet().Parse(nil, func(k string) string { return map[string]string{"THINDIST_IN_PROCESS_BELOW": "lots"}[k] }); err == nil ||
		!strings.HasPrefix(err.Error(), `THINDIST_IN_PROCESS_BELOW: bad value "lots"`) {
		t.Errorf("a bad THINDIST_IN_PROCESS_BELOW: %v", err)
	}
	if err := newSet().Parse([]string{"--in-process-below=1M"}, func(string) string { return "" }); err == nil ||
		err.Error() != "--in-process-below is a setting of 'thindist link', not of 'thindist'" {
		t.Errorf("--in-process-below on the DTLTO command line: %v", err)
	}
	var b strings.Builder
	newSet().PrintDefaults(&b)
	if strings.Contains(b.String(), "in-process-below") {
		t.Errorf("the shared settings' help lists another command's setting")
	}
}

// TestCheckEnviron: a THINDIST_* variable that no setting reads is a
// warning, with the variable meant; the settings' variables (another
// command's too), the command's options' and those thindist, its scripts
// and tests use for other purposes are not.
func TestCheckEnviron(t *testing.T) {
	var cfg Config
	var zero bool
	fs := NewFlagSet("thindist stats")
	fs.Bool(&zero, "zero", "Stats", false, "reset")
	fs.CommandOnly("zero")
	cfg.Register(fs)
	fs.Know(linkSet())
	if err := fs.Parse(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	fs.CheckEnviron([]string{"PATH=/bin", "THINDIST_JBOS=8", "THINDIST_JOBS=2", "THINDIST_IN_PROCESS_BELOW=1M",
		"THINDIST_REMOTE_HEADER=a=b", "THINDIST_DEBSRC=/var/cache/thindist-debsrc", "THINDIST_KERNEL_JOBS=2",
		"THINDIST_FORKSERVER_FD=3", "THINDIST_TEST_HELPER=1", "THINDIST_ZERO=1", "THINDIST_FROBNICATE=1"})
	w := fs.Warnings()
	want := []string{
		"THINDIST_JBOS is no setting's variable (did you mean THINDIST_JOBS?); variable ignored",
		"THINDIST_ZERO: --zero is an option of the command",
		"THINDIST_FROBNICATE is no setting's variable ('thindist help settings'",
	}
	if len(w) != len(want) {
		t.Fatalf("warnings %q, want %d", w, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(w[i], want[i]) {
			t.Errorf("warning %q, want it to start %q", w[i], want[i])
		}
	}
}
