package realproj

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// needSource returns the unpacked tree of the Debian source package pkg,
// skipping the test when it is absent, except under CI (CI=true), where
// scripts/debsrc.sh has run and its absence is a failure.
func needSource(t *testing.T, pkg string) string {
	t.Helper()
	src, err := FindSource(pkg)
	if err != nil {
		if errors.Is(err, ErrNoSource) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return src
}

func needToolchain(t *testing.T) Toolchain {
	t.Helper()
	testsupport.Slow(t, "builds a Debian source package with clang 22 and links it")
	tc := DefaultToolchain()
	for _, p := range []string{tc.Clang, tc.AR} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "true" {
				t.Skipf("LLVM 22 not installed: %v", err)
			}
			t.Fatal(err)
		}
	}
	return tc
}

func runIn(t *testing.T, dir, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, o.String(), e.String())
	}
	return o.String(), e.String()
}

// setupLua builds thindist and Debian's lua5.4 objects in a temporary
// directory and links the in-process ThinLTO reference, lua-inprocess.
func setupLua(t *testing.T) (tc Toolchain, tmp, thindist string, b *Build) {
	t.Helper()
	src := needSource(t, LuaPackage)
	tc = needToolchain(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp = t.TempDir()
	var err error
	if thindist, err = testprog.BuildThindist(tmp); err != nil {
		t.Fatal(err)
	}
	b, err = BuildLua(ctx, tc, src, filepath.Join(tmp, "build"))
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, b.Dir, tc.Clang, b.LinkArgs("lua-inprocess", "-Wl,--thinlto-jobs=2")...)
	return tc, tmp, thindist, b
}

// TestLuaThroughThindist builds Debian's lua5.4 with -flto=thin, links the
// interpreter once with lld's in-process ThinLTO and once with thindist as
// the DTLTO distributor, and runs a smoke script under both: the thindist
// build must pass every check and print exactly what the in-process build
// prints.
func TestLuaThroughThindist(t *testing.T) {
	tc, tmp, thindist, b := setupLua(t)
	_, linkErr := runIn(t, b.Dir, tc.Clang, b.LinkArgs("lua-dtlto",
		"-fthinlto-distributor="+thindist, "-Xthinlto-distributor=--jobs=2",
		"-Xthinlto-distributor=--cache-dir="+filepath.Join(tmp, "cache"))...)

	// The distributor really ran every backend: one job per module (lua.o
	// and each archive member the interpreter pulls in, which is all of
	// them), none failed.
	m := regexp.MustCompile(`thindist: (?:.*?: )?(\d+) jobs, (\d+) failed`).FindStringSubmatch(linkErr)
	if m == nil {
		t.Fatalf("no thindist summary in the link's stderr:\n%s", linkErr)
	}
	if jobs, _ := strconv.Atoi(m[1]); jobs != b.Modules || m[2] != "0" {
		t.Fatalf("thindist ran %s jobs (%s failed), want %d modules; stderr:\n%s", m[1], m[2], b.Modules, linkErr)
	}
	// Nothing left behind beside the output: no staging directories, no
	// native objects or shards.
	entries, _ := os.ReadDir(b.Dir)
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".thindist-") || strings.Contains(n, ".native.o") || strings.HasSuffix(n, ".json") {
			t.Errorf("left behind in the build directory: %s", n)
		}
	}

	smoke, err := filepath.Abs("testdata/smoke.lua")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := runIn(t, b.Dir, filepath.Join(b.Dir, "lua-inprocess"), smoke)
	got, _ := runIn(t, b.Dir, filepath.Join(b.Dir, "lua-dtlto"), smoke)
	if !strings.Contains(got, "smoke: all ") || !strings.HasSuffix(strings.TrimSpace(got), "checks passed") {
		t.Fatalf("the thindist-linked lua did not pass the smoke test:\n%s", got)
	}
	if got != want {
		t.Fatalf("the thindist-linked lua prints\n%s\nbut the in-process ThinLTO build prints\n%s", got, want)
	}
	// Lua's own version banner and a one-liner through the C API.
	out, _ := runIn(t, b.Dir, filepath.Join(b.Dir, "lua-dtlto"), "-e", `print(_VERSION, ("%d"):format(6*7))`)
	if out != "Lua 5.4\t42\n" {
		t.Fatalf("lua -e printed %q", out)
	}
	t.Logf("%d backend jobs through thindist; %s", b.Modules, strings.TrimSpace(got[strings.LastIndex(got, "smoke:"):]))
}

// TestLuaThroughThindistLink links the same lua5.4 objects with `thindist
// link` (the separate thin-link flow, with liblua.a's archive semantics): the
// interpreter must pass the smoke test and print what the in-process ThinLTO
// build prints, and the work directory must be gone.
func TestLuaThroughThindistLink(t *testing.T) {
	tc, tmp, thindist, b := setupLua(t)
	args := append([]string{"link", "--jobs=2", "--in-process-below=0", "--cache-dir=" + filepath.Join(tmp, "cache"), "--", tc.Clang},
		b.LinkArgs("lua-link")...)
	_, linkErr := runIn(t, b.Dir, thindist, args...)
	m := regexp.MustCompile(`thindist: (?:.*?: )?(\d+) jobs, (\d+) failed`).FindStringSubmatch(linkErr)
	if m == nil {
		t.Fatalf("no thindist summary in thindist link's stderr:\n%s", linkErr)
	}
	if jobs, _ := strconv.Atoi(m[1]); jobs != b.Modules || m[2] != "0" {
		t.Fatalf("thindist link ran %s jobs (%s failed), want %d modules; stderr:\n%s", m[1], m[2], b.Modules, linkErr)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "lua-link.thindist.d")); !os.IsNotExist(err) {
		t.Errorf("the work directory was left behind")
	}
	smoke, err := filepath.Abs("testdata/smoke.lua")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := runIn(t, b.Dir, filepath.Join(b.Dir, "lua-inprocess"), smoke)
	got, _ := runIn(t, b.Dir, filepath.Join(b.Dir, "lua-link"), smoke)
	if !strings.HasSuffix(strings.TrimSpace(got), "checks passed") || got != want {
		t.Fatalf("the thindist link build prints\n%s\nbut the in-process ThinLTO build prints\n%s", got, want)
	}
}
