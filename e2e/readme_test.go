package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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

// readmeBlock returns the body of the README's ```lang block whose first
// line is "# " + title.
func readmeBlock(t *testing.T, lang, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)\n```"+regexp.QuoteMeta(lang)+"\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if first, _, _ := strings.Cut(m[1], "\n"); first == "# "+title || strings.HasPrefix(first, "# "+title+" ") {
			return m[1]
		}
	}
	t.Fatalf("README.md has no ```%s block starting with %q", lang, "# "+title)
	return ""
}

// The program the README's examples build: two files, the call across
// them inlined only by ThinLTO's cross-module importing.
const (
	readmeA    = "#include <stdio.h>\nint b(int);\nint main(void) { printf(\"%d\\n\", b(20)); return 0; }\n"
	readmeB    = "int b(int x) { return 2 * x + 2; }\n"
	readmeWant = "42\n"
)

// readmeProject writes the example program and the given files into a
// fresh directory and returns it.
func readmeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["a.c"], files["b.c"] = readmeA, readmeB
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runREADME runs shell text in dir as a user who followed the README
// would: clang 22's directory first on PATH, then thindist's, and a cache
// of the test's own, and env. It checks that thindist ran (its summary
// line names the 2 jobs) and that dir/exe prints what the program should,
// and returns what the commands printed.
func runREADME(t *testing.T, dir, text, exe string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", text)
	cmd.Dir = dir
	cmd.Env = testEnv(t, append([]string{"PATH=" + llvmBin + string(os.PathListSeparator) + filepath.Dir(thindist) +
		string(os.PathListSeparator) + os.Getenv("PATH"), "MAKEFLAGS=", "CC=", "CC_LD="}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s\n: %v\n%s", text, err, out)
	}
	if !strings.Contains(string(out), ": 2 jobs, 0 failed") {
		t.Errorf("thindist did not run the backends (no summary line):\n%s", out)
	}
	got, err := exec.CommandContext(ctx, filepath.Join(dir, exe)).Output()
	if err != nil || string(got) != readmeWant {
		t.Errorf("%s prints %q (%v), want %q", exe, got, err, readmeWant)
	}
	return string(out)
}

// reportsDoc is the page that shows what a run prints (the summary line
// among it), relative to the repository's root.
const reportsDoc = "docs/reports.md"

// TestREADMEPlainClang runs the README's plain clang commands, and checks
// that the summary line reportsDoc shows is the one they print, but for
// the names and figures.
func TestREADMEPlainClang(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir := readmeProject(t, map[string]string{})
	out := runREADME(t, dir, readmeBlock(t, "sh", "plain clang"), "app")
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(reportsDoc)))
	if err != nil {
		t.Fatal(err)
	}
	sample := regexp.MustCompile("`(thindist: app: [^`]*jobs[^`]*)`").FindStringSubmatch(string(b))
	real := regexp.MustCompile(`(?m)^thindist: app: .*jobs.*$`).FindString(out)
	if sample == nil || real == "" {
		t.Fatalf("no summary line: %s %q, the link printed:\n%s", reportsDoc, sample, out)
	}
	if summaryShape(sample[1]) != summaryShape(real) {
		t.Errorf("the summary line of %s\n  %s\nis not of the form of the real one\n  %s\n(%s against %s)",
			reportsDoc, sample[1], real, summaryShape(sample[1]), summaryShape(real))
	}
}

// summaryShape is a summary line without its names and figures, and
// without the parts that depend on the run ("including 300ms starting 1
// fork server", which the README shows apart, and "other 20ms").
func summaryShape(line string) string {
	for _, r := range []struct{ re, with string }{
		{` including [^,)]*`, ""},
		{`, other [^,)]*`, ""},
		{`slowest \S+ \(`, "slowest M ("},
		{`^thindist: [^:]+:`, "thindist: O:"},
		{`\d+(\.\d+)?(ns|µs|ms|s|m|h)+`, "T"},
		{`\d+`, "N"},
	} {
		line = regexp.MustCompile(r.re).ReplaceAllString(line, r.with)
	}
	return line
}

// TestREADMEMake builds with the README's Makefile under make -j2.
func TestREADMEMake(t *testing.T) {
	t.Parallel()
	needClang(t)
	needTool(t, "make")
	dir := readmeProject(t, map[string]string{"Makefile": readmeBlock(t, "make", "Make")})
	runREADME(t, dir, "make -j2", "app")
}

// TestREADMECMake builds with the README's CMakeLists.txt and commands,
// with the generator they name (Ninja) and the one their comment offers
// (Unix Makefiles, under make's jobserver).
func TestREADMECMake(t *testing.T) {
	t.Parallel()
	needClang(t)
	needTool(t, "cmake")
	lists := readmeBlock(t, "cmake", "CMake: CMakeLists.txt")
	build := readmeBlock(t, "sh", "CMake: configure and build")
	if !strings.Contains(build, "-G Ninja") || !strings.Contains(build, `-G "Unix Makefiles"`) {
		t.Fatalf("the README's CMake commands no longer name both generators:\n%s", build)
	}
	for _, gen := range []struct{ tool, flag string }{{"ninja", "-G Ninja"}, {"make", `-G "Unix Makefiles"`}} {
		t.Run(gen.tool, func(t *testing.T) {
			t.Parallel()
			needTool(t, gen.tool)
			dir := readmeProject(t, map[string]string{"CMakeLists.txt": lists})
			text := build
			if gen.tool == "make" {
				// The command with the generator of its comment.
				text = strings.Replace(text, "-G Ninja", gen.flag, 1)
			}
			runREADME(t, dir, text, "build/app")
		})
	}
}

// TestREADMEMeson builds with the README's meson.build and commands.
func TestREADMEMeson(t *testing.T) {
	t.Parallel()
	needClang(t)
	needTool(t, "meson")
	needTool(t, "ninja")
	dir := readmeProject(t, map[string]string{"meson.build": readmeBlock(t, "meson", "Meson: meson.build")})
	runREADME(t, dir, readmeBlock(t, "sh", "Meson: configure with lld and build"), "build/app")
}

// TestREADMELinkLaunchers builds with the README's recipes for thindist
// link: CMake's CMAKE_C_LINKER_LAUNCHER, and Meson's CC_LD with the
// README's wrapper. The example is small enough that thindist link would
// leave it to lld (--in-process-below): the tests lower that, to see the
// backends run through thindist.
func TestREADMELinkLaunchers(t *testing.T) {
	t.Parallel()
	needClang(t)
	t.Run("cmake", func(t *testing.T) {
		t.Parallel()
		needTool(t, "cmake")
		needTool(t, "ninja")
		dir := readmeProject(t, map[string]string{"CMakeLists.txt": readmeBlock(t, "cmake", "CMake with thindist link: CMakeLists.txt")})
		runREADME(t, dir, readmeBlock(t, "sh", "CMake with thindist link: configure and build"), "build/app", "THINDIST_IN_PROCESS_BELOW=0")
	})
	t.Run("meson", func(t *testing.T) {
		t.Parallel()
		needTool(t, "meson")
		needTool(t, "ninja")
		dir := readmeProject(t, map[string]string{"meson.build": readmeBlock(t, "meson", "Meson with thindist link: meson.build")})
		runREADME(t, dir, readmeBlock(t, "sh", "Meson with thindist link: configure and build"), "build/app", "THINDIST_IN_PROCESS_BELOW=0")
	})
}

// TestDesignSectionsNamed: every section of docs/design.md that a Go
// comment names (the file's path, a comma, the heading in double quotes,
// maybe across comment lines) is a heading there, so a renamed heading
// cannot leave a comment pointing nowhere.
func TestDesignSectionsNamed(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	cite := regexp.MustCompile(`docs/design\.md,\s*"([^"]+)"`)
	joinComments := regexp.MustCompile(`\n\s*//\s*`)
	named := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(joinComments.ReplaceAllString(string(src), " "), -1) {
			named++
			if !headings[m[1]] {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s names docs/design.md, %q, which has no such heading", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if named == 0 {
		t.Error("no comment names a section of docs/design.md: is the pattern out of date?")
	}
}
