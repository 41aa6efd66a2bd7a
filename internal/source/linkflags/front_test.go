package linkflags

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// frontRun is what one call of Front did: the command it replaced the
// process with (nil for none) and in which directory, what it printed,
// what it returned.
type frontRun struct {
	argv   []string
	dir    string
	stderr string
	err    error
}

// front runs Front on args in dir as the thindist-link in the directory
// bin (a thindist beside it or not; PATH has none), with a Replace that
// only notes what it was given.
func front(t *testing.T, dir, bin string, args ...string) frontRun {
	t.Helper()
	var r frontRun
	var stderr bytes.Buffer
	wd, _ := os.Getwd()
	os.Chdir(dir)
	defer os.Chdir(wd)
	r.err = Front(context.Background(), args, FrontEnv{
		Getenv: func(k string) string {
			if k == "THINDIST_CACHE_DIR" {
				return filepath.Join(dir, "cache")
			}
			return ""
		},
		Stderr:  &stderr,
		Replace: func(d string, argv []string) error { r.dir, r.argv = d, argv; return errors.New("replaced") },
		Self:    filepath.Join(bin, "thindist-link"),
	})
	r.stderr = stderr.String()
	return r
}

// TestFront: a link that thindist leaves to lld is announced and becomes
// the linker, in the link's directory; every other command line, good or
// bad, becomes `thindist link` with the same arguments, which says what
// is wrong; without a thindist to run, the error says so and how to fix
// it. The linker is a script that says it is LLD; the inputs are files
// with and without bitcode's magic number.
func TestFront(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ld.lld"), []byte("#!/bin/sh\necho 'LLD 22.1.0 (compatible with GNU linkers)'\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.o"), append([]byte("BC\xc0\xde"), make([]byte, 996)...), 0o644)
	os.WriteFile(filepath.Join(dir, "n.o"), append([]byte("\x7fELF"), make([]byte, 60)...), 0o644)
	t.Setenv("PATH", t.TempDir())
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	thindist := filepath.Join(bin, "thindist")
	os.WriteFile(thindist, []byte("#!/bin/sh\n"), 0o755)
	link := []string{"./ld.lld", "a.o", "n.o", "-o", "app"}
	for _, c := range []struct {
		name     string
		args     []string
		leftToLD bool
		say      string // what it prints, if anything
	}{
		{"small", []string{"--"}, true, "thindist: app: left to lld's in-process ThinLTO (1 bitcode module, 1000 B: under --in-process-below=256 KiB)\n"},
		{"small, quiet", []string{"--quiet", "--"}, true, ""},
		{"no bitcode", []string{"--in-process-below=0", "--", "./ld.lld", "n.o", "-o", "app"}, true, ""},
		{"at the threshold", []string{"--in-process-below=1000", "--"}, false, ""},
		{"0", []string{"--in-process-below=0", "--"}, false, ""},
		{"--compdb", []string{"--compdb=missing.json", "--"}, false, ""},
		{"a bad size", []string{"--in-process-below=lots", "--"}, false, ""},
		{"an unknown flag", []string{"--no-such-flag", "--"}, false, ""},
		{"--help", []string{"--help"}, false, ""},
		{"no command", []string{"--"}, false, ""},
		{"a missing linker", []string{"--", "./no-such-ld", "a.o", "-o", "app"}, false, ""},
	} {
		args := c.args
		if args[len(args)-1] == "--" && c.name != "no command" {
			args = append(slices.Clone(args), link...)
		}
		r := front(t, dir, bin, args...)
		want, wantDir := append([]string{thindist, "link"}, args...), "."
		if c.leftToLD {
			want, wantDir = args[slices.Index(args, "--")+1:], dir
		}
		if !slices.Equal(r.argv, want) || r.dir != wantDir || r.stderr != c.say {
			t.Errorf("%s: replaced by %q in %s, said %q; want %q in %s, saying %q", c.name, r.argv, r.dir, r.stderr, want, wantDir, c.say)
		}
		if r.err == nil || !strings.Contains(r.err.Error(), "replaced") {
			t.Errorf("%s: Front returned %v, not Replace's error", c.name, r.err)
		}
	}
	r := front(t, dir, t.TempDir(), "--in-process-below=0", "--", "./ld.lld", "a.o", "-o", "app")
	if r.argv != nil || r.err == nil || !strings.Contains(r.err.Error(), "cannot find thindist") || !strings.Contains(r.err.Error(), "install both") {
		t.Errorf("without thindist: replaced by %q, %v", r.argv, r.err)
	}
}

// TestFindThindist: the thindist beside the front first, else PATH's.
func TestFindThindist(t *testing.T) {
	dir, path := t.TempDir(), t.TempDir()
	t.Setenv("PATH", path)
	self := filepath.Join(dir, "thindist-link")
	if got := FindThindist(self); got != "" {
		t.Errorf("found %q where there is none", got)
	}
	os.WriteFile(filepath.Join(path, "thindist"), []byte("#!/bin/sh\n"), 0o755)
	if got := FindThindist(self); got != filepath.Join(path, "thindist") {
		t.Errorf("found %q; want PATH's", got)
	}
	os.WriteFile(filepath.Join(dir, "thindist"), []byte("#!/bin/sh\n"), 0o755)
	if got := FindThindist(self); got != filepath.Join(dir, "thindist") {
		t.Errorf("found %q; want the one beside the front", got)
	}
}
