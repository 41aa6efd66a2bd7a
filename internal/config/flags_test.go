package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parse registers a Config's flags and parses args with env as the
// environment.
func parse(t *testing.T, args []string, env map[string]string) (*Config, *FlagSet, error) {
	t.Helper()
	var c Config
	fs := NewFlagSet("t")
	c.Register(fs)
	err := fs.Parse(args, func(k string) string { return env[k] })
	return &c, fs, err
}

func source(fs *FlagSet, name string) string {
	for _, s := range fs.Settings() {
		if s.Name == name {
			return s.Source
		}
	}
	return "no such setting"
}

// TestPrecedence checks default < file < environment < flag for a setting
// of every kind, with the file found where a user puts it once
// ($XDG_CONFIG_HOME/thindist/config).
func TestPrecedence(t *testing.T) {
	type kind struct {
		name               string // the setting
		file, env, flag    string // a value from each source
		get                func(*Config) string
		def, fv, ev, flagv string // the effective value after each step
	}
	kvs := func(l KVList) string { return l.String() }
	kinds := []kind{
		{name: "quiet", file: "true", env: "false", flag: "true",
			get: func(c *Config) string { return strconv.FormatBool(c.Quiet) },
			def: "false", fv: "true", ev: "false", flagv: "true"},
		{name: "jobs", file: "3", env: "5", flag: "7",
			get: func(c *Config) string { return strconv.Itoa(c.Jobs) },
			def: strconv.Itoa(runtime.NumCPU()), fv: "3", ev: "5", flagv: "7"},
		{name: "remote-timeout", file: "90s", env: "2m", flag: "45",
			get: func(c *Config) string { return c.Remote.Timeout.String() },
			def: time.Minute.String(), fv: "1m30s", ev: "2m0s", flagv: "45s"},
		{name: "cache-size", file: "1G", env: "2G", flag: "3G",
			get: func(c *Config) string { return c.CacheSize }, def: "10G", fv: "1G", ev: "2G", flagv: "3G"},
		{name: "remote-platform", file: "OSFamily=Linux", env: "Pool=a,OSFamily=Linux", flag: "Pool=b",
			get: func(c *Config) string { return kvs(c.Remote.Platform) },
			def: "", fv: "OSFamily=Linux", ev: "Pool=a,OSFamily=Linux", flagv: "Pool=b"},
		{name: "remote-header", file: "x-api-key=f", env: "x-api-key=e", flag: "x-api-key=c",
			get: func(c *Config) string { return kvs(c.Remote.Headers) },
			def: "", fv: "x-api-key=f", ev: "x-api-key=e", flagv: "x-api-key=c"},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			xdg := t.TempDir()
			file := filepath.Join(xdg, "thindist", "config")
			env := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": t.TempDir()}
			steps := []struct {
				what       string
				args       []string
				want, from string
			}{
				{"default", nil, k.def, "default"},
				{"file", nil, k.fv, "file " + file},
				{"environment", nil, k.ev, "environment " + EnvName(k.name)},
				{"flag", []string{"--" + k.name + "=" + k.flag}, k.flagv, "flag --" + k.name},
			}
			for _, st := range steps {
				switch st.what {
				case "file":
					os.MkdirAll(filepath.Dir(file), 0o755)
					if err := os.WriteFile(file, []byte("# set once\n"+k.name+" = "+k.file+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				case "environment":
					env[EnvName(k.name)] = k.env
				}
				c, fs, err := parse(t, st.args, env)
				if err != nil {
					t.Fatalf("%s: %v", st.what, err)
				}
				if got := k.get(c); got != st.want {
					t.Errorf("after the %s: %s = %q, want %q", st.what, k.name, got, st.want)
				}
				if got := source(fs, k.name); got != st.from {
					t.Errorf("after the %s: %s comes from %q, want %q", st.what, k.name, got, st.from)
				}
			}
		})
	}
}

// TestBazelSpellings checks that Bazel's remote flags set the same
// settings as thindist's own.
func TestBazelSpellings(t *testing.T) {
	bazel, _, err := parse(t, []string{"--remote_executor=grpcs://re.example:443", "--remote_instance_name=main",
		"--remote_header=x-buildbuddy-api-key=k", "--remote_header=x-b=2", "--remote_timeout=90",
		"--remote_upload_local_results=false", "job.json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ours, _, err := parse(t, []string{"--remote=grpcs://re.example:443", "--remote-instance=main",
		"--remote-header=x-buildbuddy-api-key=k", "--remote-header=x-b=2", "--remote-timeout=90s",
		"--remote-upload=false", "job.json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bazel.Remote, ours.Remote) {
		t.Errorf("Bazel's spellings give %+v, thindist's %+v", bazel.Remote, ours.Remote)
	}

	// --remote_cache alone is a cache, as in Bazel; with --remote_executor
	// naming the same service, execution.
	c, fs, err := parse(t, []string{"--remote_cache=grpc://cache:8980"}, nil)
	if err != nil || c.Remote.Target != "grpc://cache:8980" || !c.Remote.CacheOnly {
		t.Errorf("--remote_cache alone: %+v, %v; want the target, cache only", c.Remote, err)
	}
	if got := source(fs, "remote-cache-only"); got != "flag --remote_cache" {
		t.Errorf("remote-cache-only comes from %q", got)
	}
	for _, args := range [][]string{
		{"--remote_cache=grpc://x:1", "--remote_executor=grpc://x:1"},
		{"--remote_executor=grpc://x:1", "--remote_cache=grpc://x:1"},
	} {
		c, _, err := parse(t, args, nil)
		if err != nil || c.Remote.Target != "grpc://x:1" || c.Remote.CacheOnly {
			t.Errorf("%v: %+v, %v; want remote execution", args, c.Remote, err)
		}
	}
	if _, _, err := parse(t, []string{"--remote_executor=grpc://x:1", "--remote_cache=grpc://y:1"}, nil); err == nil ||
		!strings.Contains(err.Error(), "one service") {
		t.Errorf("two services: %v", err)
	}
	// In a config file too.
	file := filepath.Join(t.TempDir(), "conf")
	os.WriteFile(file, []byte("remote_executor = grpc://f:1\nremote_instance_name = fi\n"), 0o644)
	c, fs, err = parse(t, []string{"--config", file}, nil)
	if err != nil || c.Remote.Target != "grpc://f:1" || c.Remote.Instance != "fi" {
		t.Errorf("Bazel spellings in a file: %+v, %v", c.Remote, err)
	}
	if got := source(fs, "remote"); got != "file "+file {
		t.Errorf("remote comes from %q", got)
	}
}

// TestConfigFiles checks that --config wins over the default file, that an
// explicit file must exist while the default one may not, and that errors
// name the file and line.
func TestConfigFiles(t *testing.T) {
	xdg := t.TempDir()
	def := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(def), 0o755)
	os.WriteFile(def, []byte("jobs = 3\ncache-size = 1G\n"), 0o644)
	explicit := filepath.Join(t.TempDir(), "project.conf")
	os.WriteFile(explicit, []byte("jobs = 4\n"), 0o644)
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	c, fs, err := parse(t, []string{"--config=" + explicit}, env)
	if err != nil || c.Jobs != 4 || c.CacheSize != "1G" {
		t.Fatalf("jobs %d cache-size %s, %v: want 4 from --config, 1G from the default file", c.Jobs, c.CacheSize, err)
	}
	if source(fs, "jobs") != "file "+explicit || source(fs, "cache-size") != "file "+def {
		t.Errorf("sources %q, %q", source(fs, "jobs"), source(fs, "cache-size"))
	}
	// Without XDG_CONFIG_HOME: ~/.config/thindist/config.
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config", "thindist"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "thindist", "config"), []byte("jobs = 6\n"), 0o644)
	if c, _, err := parse(t, nil, map[string]string{"HOME": home}); err != nil || c.Jobs != 6 {
		t.Errorf("~/.config/thindist/config: jobs %d, %v", c.Jobs, err)
	}
	if _, _, err := parse(t, nil, map[string]string{"HOME": t.TempDir()}); err != nil {
		t.Errorf("no default file: %v", err)
	}
	if _, _, err := parse(t, []string{"--config=" + explicit + ".missing"}, env); err == nil {
		t.Errorf("a missing --config file is accepted")
	}
}

// TestConfigFileTypos: a typo in a config file (which every link reads) is
// a warning naming the file, the line and the setting meant; the other
// lines still apply and the command goes on.
func TestConfigFileTypos(t *testing.T) {
	xdg := t.TempDir()
	def := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(def), 0o755)
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	for _, c := range []struct {
		file, want string
	}{
		{"jobs = 3\n\ncache-sise = 1G\n", def + `:3: unknown setting "cache-sise" (did you mean cache-size?)`},
		{"jobs = 3\nno-such-flag = 1\n", def + `:2: unknown setting "no-such-flag" (the settings`},
		{"jobs = 3\nquiet = many\n", def + `:2: quiet: bad value "many" (want true or false)`},
	} {
		os.WriteFile(def, []byte(c.file), 0o644)
		cfg, fs, err := parse(t, nil, env)
		if err != nil || cfg.Jobs != 3 {
			t.Errorf("%q: jobs %d, error %v; want the other lines applied and no error", c.file, cfg.Jobs, err)
		}
		if w := fs.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], c.want) || !strings.HasSuffix(w[0], "line ignored") {
			t.Errorf("%q: warnings %q, want one starting %q", c.file, w, c.want)
		}
	}
}

// TestFlagsAnywhere: flags go before or after positional arguments; "--"
// ends them; InOrder ends them at the first positional argument.
func TestFlagsAnywhere(t *testing.T) {
	c, fs, err := parse(t, []string{"last", "--jobs=3", "x", "-q", "--", "--trace=t"}, nil)
	if err != nil || c.Jobs != 3 || !c.Quiet || c.Trace != "" || !reflect.DeepEqual(fs.Args(), []string{"last", "x", "--trace=t"}) {
		t.Errorf("jobs %d quiet %v trace %q args %q, %v", c.Jobs, c.Quiet, c.Trace, fs.Args(), err)
	}
	var cfg Config
	fs = NewFlagSet("t")
	cfg.Register(fs)
	fs.InOrder()
	if err := fs.Parse([]string{"--jobs=2", "clang", "-q", "-o", "app"}, func(string) string { return "" }); err != nil ||
		cfg.Jobs != 2 || cfg.Quiet || !reflect.DeepEqual(fs.Args(), []string{"clang", "-q", "-o", "app"}) {
		t.Errorf("in order: jobs %d quiet %v args %q, %v", cfg.Jobs, cfg.Quiet, fs.Args(), err)
	}
}

// TestCommandOnly: an option of a command (stats --zero, --json) comes from
// the command line only: not from the environment, not from a file.
func TestCommandOnly(t *testing.T) {
	xdg := t.TempDir()
	def := filepath.Join(xdg, "thindist", "config")
	os.MkdirAll(filepath.Dir(def), 0o755)
	os.WriteFile(def, []byte("zero = true\n"), 0o644)
	newSet := func() (*FlagSet, *bool) {
		var cfg Config
		var zero bool
		fs := NewFlagSet("t")
		fs.Bool(&zero, "zero", "Stats", false, "reset")
		fs.CommandOnly("zero")
		cfg.Register(fs)
		return fs, &zero
	}
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "THINDIST_ZERO": "1"}
	fs, zero := newSet()
	if err := fs.Parse(nil, func(k string) string { return env[k] }); err != nil || *zero {
		t.Errorf("zero = %v from the environment or a file (%v)", *zero, err)
	}
	if w := fs.Warnings(); len(w) != 1 || !strings.Contains(w[0], def+`:1: "zero" is an option of the command`) {
		t.Errorf("warnings %q", w)
	}
	for _, s := range fs.Settings() {
		if s.Name == "zero" {
			t.Errorf("zero is listed as a setting")
		}
	}
	fs, zero = newSet()
	if err := fs.Parse([]string{"--zero"}, func(k string) string { return env[k] }); err != nil || !*zero {
		t.Errorf("--zero on the command line: %v, %v", *zero, err)
	}
}

// TestFlagErrors checks that errors name the flag with two dashes and say
// what is expected.
func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--jobs=abc"}, nil, `--jobs: bad value "abc" (want a number of at least 1)`},
		{[]string{"-j", "x"}, nil, `-j: bad value "x" (want a number`},
		{[]string{"--quiet=maybe"}, nil, `--quiet: bad value "maybe" (want true or false)`},
		{[]string{"--remote-timeout=soon"}, nil, `--remote-timeout: bad value "soon" (want a duration such as 30s`},
		{[]string{"--remote-header=novalue"}, nil, `--remote-header: "novalue" is not KEY=VALUE`},
		{[]string{"--no-such"}, nil, `unknown flag --no-such`},
		{[]string{"--cache-sise=1G"}, nil, `unknown flag --cache-sise (did you mean --cache-size?)`},
		{[]string{"-jbos=1"}, nil, `unknown flag --jbos (did you mean --jobs?)`},
		{[]string{"--trace"}, nil, `--trace: expected a value`},
		{nil, map[string]string{"THINDIST_JOBS": "abc"}, `THINDIST_JOBS: bad value "abc" (want a number`},
		{[]string{"--remote=grpc://h:1", "--remote-compress=fast"}, nil, `--remote-compress: bad value "fast" (want auto, downloads, all or none)`},
	} {
		cfg, _, err := parse(t, c.args, c.env)
		if err == nil {
			err = cfg.Check()
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %v: error %v, want it to start with %q", c.args, c.env, err, c.want)
		}
	}
}

// TestSettingsRedactHeaders: headers carry API keys; `thindist config`
// shows their names only.
func TestSettingsRedactHeaders(t *testing.T) {
	_, fs, err := parse(t, []string{"--remote-header=x-buildbuddy-api-key=SECRET"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fs.Settings() {
		if strings.Contains(s.Value, "SECRET") {
			t.Errorf("%s shows its secret: %q", s.Name, s.Value)
		}
		if s.Name == "remote-header" && s.Value != "x-buildbuddy-api-key=<redacted>" {
			t.Errorf("remote-header shown as %q", s.Value)
		}
	}
}
