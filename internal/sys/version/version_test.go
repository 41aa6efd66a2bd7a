package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport"
)

func TestDescribe(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "33562d01b9abc446052c832fbfbc57d00979a04b"},
		{Key: "vcs.time", Value: "2026-11-27T16:22:02Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, c := range []struct {
		set, module string
		settings    []debug.BuildSetting
		want        string
	}{
		{"dev", "v0.0.0-20261127162202-33562d01b9ab+dirty", vcs,
			"v0.0.0-20261127162202-33562d01b9ab (commit 33562d01b9ab of 2026-11-27T16:22:02Z, with uncommitted changes)"},
		{"v1.2.0", "(devel)", vcs[:3], "v1.2.0 (commit 33562d01b9ab of 2026-11-27T16:22:02Z)"},
		{"dev", "v1.3.0", nil, "v1.3.0"},
		{"dev", "(devel)", nil, "dev (no commit recorded: built outside a git checkout, or with -buildvcs=false)"},
	} {
		if got := describe(c.set, c.module, c.settings); got != c.want {
			t.Errorf("describe(%q, %q, ...) = %q, want %q", c.set, c.module, got, c.want)
		}
	}
}

// TestInstalledBuildNamesItsCommit builds thindist in a clone of this
// repository with the build command of scripts/install.sh (the README's
// first command: build_thindist, from scripts/lib/build.sh), with this
// machine's Go settings (which may turn VCS stamping off in GOFLAGS), and
// checks that --version names the clone's commit, then that a changed
// tree says so.
func TestInstalledBuildNamesItsCommit(t *testing.T) {
	testsupport.Slow(t, "builds thindist")
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var build string
	for _, line := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(line, "build_thindist ") {
			build = line
			break
		}
	}
	if build == "" {
		t.Fatal("scripts/install.sh has no `build_thindist ...` line")
	}
	build = `root=$PWD; . scripts/lib/build.sh; ` + build
	clone := filepath.Join(t.TempDir(), "thindist")
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(root, "git", "clone", "-q", root, clone)
	rev := run(clone, "git", "rev-parse", "HEAD")
	bindir := t.TempDir()
	version := func() string {
		t.Helper()
		cmd := exec.Command("sh", "-c", build)
		cmd.Dir = clone
		cmd.Env = append(os.Environ(), "bindir="+bindir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", build, err, out)
		}
		return run(clone, filepath.Join(bindir, "thindist"), "--version")
	}
	v := version()
	if !strings.Contains(v, "commit "+rev[:12]) || strings.Contains(v, "dev") || strings.Contains(v, "uncommitted") {
		t.Errorf("thindist built by %q in a clean clone at %s says %q; want its commit, and no \"dev\"", build, rev[:12], v)
	}
	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := version(); !strings.Contains(v, "commit "+rev[:12]+" ") || !strings.Contains(v, "with uncommitted changes") {
		t.Errorf("thindist built in a changed clone says %q; want its commit, with uncommitted changes", v)
	}
}
