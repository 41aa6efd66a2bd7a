package linkflags

import (
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/config"
)

// parse reads a `thindist link` command line as thindist does, with no
// environment and no config file.
func parse(t *testing.T, args ...string) (*config.Config, *Flags, *config.FlagSet) {
	t.Helper()
	var cfg config.Config
	var f Flags
	fs := NewFlagSet(&cfg, &f)
	if err := fs.Parse(args, func(string) string { return "" }); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return &cfg, &f, fs
}

// TestInProcessBelow: the size given, or its default; 0 under every option
// that asks for what only distributing gives, whatever the size.
func TestInProcessBelow(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, 256 << 10},
		{[]string{"--in-process-below=1M"}, 1 << 20},
		{[]string{"--in-process-below=0"}, 0},
		{[]string{"--in-process-below=1M", "--compdb=db.json"}, 0},
		{[]string{"--in-process-below=1M", "--sections-as-compiled"}, 0},
		{[]string{"--in-process-below=1M", "--keep-native-objects=kept"}, 0},
		{[]string{"--in-process-below=1M", "--keep-work-dir"}, 0},
		{[]string{"--in-process-below=1M", "--work-dir=w", "--separate-thin-link", "-v"}, 1 << 20},
	} {
		_, f, _ := parse(t, append(c.args, "--", "ld.lld")...)
		got, err := f.InProcessBelow()
		if err != nil || got != c.want {
			t.Errorf("%v: %d, %v; want %d", c.args, got, err, c.want)
		}
	}
	// A bad size is refused as it is read, wherever from (config's values).
	var cfg config.Config
	var f Flags
	err := NewFlagSet(&cfg, &f).Parse([]string{"--in-process-below=lots", "--", "ld.lld"}, func(string) string { return "" })
	if err == nil || !strings.HasPrefix(err.Error(), `--in-process-below: bad value "lots"`) {
		t.Errorf("a bad size: %v; want an error naming the flag", err)
	}
}

// TestOptions: the flags land in thinlink's options; the tool facts live
// in the cache directory, and not at all under --no-cache.
func TestOptions(t *testing.T) {
	cfg, f, fs := parse(t, "--compiler=clang-22", "--work-dir=w", "--keep-native-objects=k", "--separate-thin-link",
		"--sections-as-compiled", "-v", "--cache-dir="+t.TempDir(), "--", "ld.lld", "-o", "x")
	o, err := f.Options(cfg, fs.Args(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o.Compiler != "clang-22" || o.WorkDir != "w" || o.KeepNativeObjects != "k" || !o.SeparateThinLink ||
		!o.SectionsAsCompiled || !o.Verbose || o.InProcessBelow != 0 || strings.Join(o.Command, " ") != "ld.lld -o x" {
		t.Errorf("options %+v", o)
	}
	if o.ToolFacts == nil {
		t.Errorf("no tool facts with a cache")
	}
	cfg, f, fs = parse(t, "--no-cache", "--", "ld.lld")
	if o, _ := f.Options(cfg, fs.Args(), func(string) string { return "" }); o.ToolFacts != nil {
		t.Errorf("tool facts under --no-cache")
	}
}
