package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's first code block is the whole set-up on a fresh machine: its
// first command installs and runs the demo, its second installs what the
// tests need and runs them. CI must run exactly those commands, or a green
// CI could hide a missing install step.

// readmeCommands returns the commands of the README's first sh block, with
// their comments removed.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no ```sh block")
	}
	return commandLines(string(m[1]))
}

// commandLines returns the non-blank lines of a shell text with comments and
// surrounding blanks removed.
func commandLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

func TestCIRunsTheREADMECommands(t *testing.T) {
	root := repoRoot(t)
	want := readmeCommands(t)
	if len(want) != 2 {
		t.Fatalf("README's set-up block has %d commands, want 2: %q", len(want), want)
	}
	b, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	// .ci/run may set the shell up and change to the repository root; every
	// other line must be one of the README's commands, in order.
	var got []string
	for _, line := range commandLines(string(b)) {
		if strings.HasPrefix(line, "set ") || strings.HasPrefix(line, "cd ") {
			continue
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf(".ci/run runs\n  %s\nbut the README's set-up is\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestTestScriptInstallsWhatTestsNeed checks that scripts/test.sh (with the
// packages it shares with scripts/install.sh) installs every Debian package
// whose commands the tests look for, so that the README's second command
// passes on a machine that has only what its first installed.
func TestTestScriptInstallsWhatTestsNeed(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	installed := map[string]bool{}
	// The need_packages call spans continued lines.
	m := regexp.MustCompile(`(?s)\nneed_packages ((?:[^\n]*\\\n)*[^\n]*)`).FindAllStringSubmatch(string(b), -1)
	for _, call := range m {
		for _, f := range strings.Fields(strings.ReplaceAll(call[1], "\\", " ")) {
			installed[f] = true
		}
	}
	// Each tool a test needs, and the package it comes from.
	for tool, pkg := range map[string]string{
		"clang-22": "clang-22", "ld.lld-22": "lld-22", "llvm-ar-22": "llvm-22",
		"clang-19": "clang-19", "ld.lld-19": "lld-19", "llvm-ar-19": "llvm-19",
		"make": "make", "cmake": "cmake", "ninja": "ninja-build", "meson": "meson",
		"dpkg-source": "dpkg-dev", "ip": "iproute2", "unshare": "util-linux",
		"chromium": "chromium", "buildstream's CAS server": "python3-buildstream",
	} {
		if !installed[pkg] {
			t.Errorf("scripts/test.sh does not install %s, which the tests need for %s", pkg, tool)
		}
	}
}

// repoRoot is the repository's root: go test runs a package's tests in its
// own directory, and e2e is one level down.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
