package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestConfigFilePrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "thindist.conf")
	os.WriteFile(file, []byte(`# team settings
remote = grpcs://file.example:443
remote-instance = "from-file"
remote-header = x-buildbuddy-api-key=k1
remote-header = x-other=2
remote-platform = OSFamily=Linux
remote-jobs = 20
remote-cache-only
`), 0o644)
	env := map[string]string{
		"THINDIST_CONFIG":          file,
		"THINDIST_REMOTE_INSTANCE": "from-env",
		"THINDIST_REMOTE_PLATFORM": "OSFamily=Linux,Pool=big",
	}
	var c Config
	fs := NewFlagSet("t")
	c.Register(fs)
	if err := fs.Parse([]string{"--remote-jobs=7", "job.json"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	r := c.Remote
	if r.Target != "grpcs://file.example:443" || r.Instance != "from-env" || r.Jobs != 7 || !r.CacheOnly {
		t.Errorf("precedence wrong: %+v", r)
	}
	if len(r.Headers) != 2 || r.Headers[0] != [2]string{"x-buildbuddy-api-key", "k1"} {
		t.Errorf("headers %v", r.Headers)
	}
	if len(r.Platform) != 2 || r.Platform[1] != [2]string{"Pool", "big"} {
		t.Errorf("platform from env %v", r.Platform)
	}
	if err := c.Check(); err != nil {
		t.Error(err)
	}
	os.WriteFile(file, []byte("no-such-flag = 1\n"), 0o644)
	fs = NewFlagSet("t")
	(&Config{}).Register(fs)
	if err := fs.Parse(nil, func(k string) string { return env[k] }); err != nil || len(fs.Warnings()) != 1 {
		t.Errorf("unknown setting: %v, warnings %q; want one warning and no error", err, fs.Warnings())
	}
}
