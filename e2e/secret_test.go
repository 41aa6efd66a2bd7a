package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/observe/record"
)

// An API key passed as a header (--remote-header, in any of the spellings
// that reach thindist) must not be stored or shown: not in the run's record,
// nor in `thindist report` (text, JSON, HTML), nor in a --trace. Records are
// its owner's alone.
func TestCredentialsNeverStored(t *testing.T) {
	needClang(t)
	const key, bearer = "SECRET-api-key-4711", "SECRET-bearer-0815"
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 3)

	// As lld's distributor: one header as one argument, one as two.
	dtltoLink(t, dir, cache, "app",
		"-Xthinlto-distributor=--remote-header=x-buildbuddy-api-key="+key,
		"-Xthinlto-distributor=--remote-header", "-Xthinlto-distributor=authorization=Bearer "+bearer,
		"-Xthinlto-distributor=--trace="+filepath.Join(dir, "dtlto-trace.json"))
	// As `thindist link`, with Bazel's spelling.
	if code, out := runThindist(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "link",
		"--remote_header=x-api-key="+key, "--trace=link-trace.json", "--",
		clang, "-flto=thin", "-fuse-ld=lld", "main.o", "libutil.a", "-o", "app2"); code != 0 {
		t.Fatalf("thindist link: exit %d\n%s", code, out)
	}

	leaks := func(what, text string) {
		t.Helper()
		for _, s := range []string{key, bearer} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a credential (%s):\n%s", what, s, text)
			}
		}
	}
	records := filepath.Join(cache, "records")
	if fi, err := os.Stat(records); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %v, want 0700", records, fi.Mode().Perm())
	}
	files, _ := filepath.Glob(filepath.Join(records, "2*.json")) // not totals.json
	if len(files) != 2 {
		t.Fatalf("want 2 records, found %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		leaks(f, string(b))
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	// The record still says which headers were sent.
	var run record.Run
	b, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(run.Linker, " "), "x-buildbuddy-api-key=<redacted>") {
		t.Errorf("the DTLTO record's linker command line lost the header's key: %q", run.Linker)
	}
	for _, tr := range []string{"dtlto-trace.json", "link-trace.json"} {
		b, err := os.ReadFile(filepath.Join(dir, tr))
		if err != nil {
			t.Fatal(err)
		}
		leaks(tr, string(b))
	}

	// A record written by an earlier thindist, which kept credentials, is
	// shown without them.
	old := run
	old.ID = "20260101-000000.000-1"
	old.Args = []string{"thindist", "--remote-header", "x-api-key=" + key}
	old.Linker = []string{"ld.lld", "--thinlto-distributor-arg=--remote-header=authorization=Bearer " + bearer}
	old.Log = "thindist: warning: ld.lld --thinlto-distributor-arg=--remote-header=x-api-key=" + key + "\n"
	b, _ = json.Marshal(old)
	oldPath := filepath.Join(records, old.ID+".json")
	if err := os.WriteFile(oldPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"THINDIST_CACHE_DIR=" + cache}
	for _, which := range []string{"last", "last~1", old.ID} {
		for _, args := range [][]string{{"report", which}, {"report", "--json", which}} {
			code, out := runThindistStdout(t, dir, env, args...)
			if code != 0 {
				t.Fatalf("thindist %s: exit %d\n%s", strings.Join(args, " "), code, out)
			}
			leaks("thindist "+strings.Join(args, " "), out)
		}
		page := filepath.Join(t.TempDir(), "r.html")
		if code, out := runThindist(t, dir, env, "report", "--html", page, which); code != 0 {
			t.Fatalf("thindist report --html: exit %d\n%s", code, out)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		leaks("report --html "+which, string(b))
	}
}
