package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestSmallLinkBecomesTheLinker: `thindist link`, and the thindist-link
// front, leave a link with less bitcode than --in-process-below to lld by
// replacing themselves with the link command, which then runs as their
// process, exactly as given: the program is the one the command makes by
// itself, and a failing link fails with the linker's status and messages
// alone. Started with SIGINT ignored (a build in the background), the
// linker ignores it too.
func TestSmallLinkBecomesTheLinker(t *testing.T) {
	needClang(t)
	for _, entry := range [][]string{{thindist, "link"}, {filepath.Join(filepath.Dir(thindist), "thindist-link")}} {
		t.Run(filepath.Base(entry[0]), func(t *testing.T) { smallLinkBecomesTheLinker(t, entry) })
	}
}

func smallLinkBecomesTheLinker(t *testing.T, entry []string) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int b(int);\nint main(void){ return b(2) == 6 ? 0 : 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.c"), []byte("int b(int x){ return x * 3; }\n"), 0o644)
	run := func(argv ...string) {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	for _, f := range []string{"a", "b"} {
		run(clang, "-O2", "-flto=thin", "-c", f+".c", "-o", f+".o")
	}
	// The link command: a driver that notes the process it runs as and the
	// signals it ignores.
	os.WriteFile(filepath.Join(dir, "cc"), []byte("#!/bin/sh\necho $$ >> pids\n"+
		"sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status >> ignored\nexec "+clang+" \"$@\"\n"), 0o755)
	link := func(out string, extra ...string) (*exec.Cmd, string, error) {
		args := append(append(slices.Clone(entry), "--in-process-below=1M", "--", "./cc", "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", out), extra...)
		cmd := exec.Command(args[0], args[1:]...)
		if out == "bg" { // as a shell starts a background job
			cmd = exec.Command("/bin/sh", append([]string{"-c", `trap '' INT; exec "$0" "$@"`}, args...)...)
		}
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return cmd, stderr.String(), err
	}
	cmd, stderr, err := link("app")
	if err != nil || !strings.Contains(stderr, "thindist: app: left to lld's in-process ThinLTO (2 bitcode modules") {
		t.Fatalf("%v: %s", err, stderr)
	}
	pids := strings.Fields(string(readFile(t, filepath.Join(dir, "pids"))))
	if len(pids) == 0 || pids[len(pids)-1] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the link ran as process %v; %s was %d: it did not become the link", pids, entry[0], cmd.Process.Pid)
	}
	run(clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "ref")
	if !bytes.Equal(readFile(t, filepath.Join(dir, "app")), readFile(t, filepath.Join(dir, "ref"))) {
		t.Errorf("the program differs from the one its command makes by itself")
	}
	run("./app")
	// SIGINT is bit 2 of SigIgn: ignored in the linker when thindist was
	// started with it ignored, not otherwise.
	sigint := func() bool {
		lines := strings.Fields(string(readFile(t, filepath.Join(dir, "ignored"))))
		mask, err := strconv.ParseUint(lines[len(lines)-1], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return mask&2 != 0
	}
	if sigint() {
		t.Errorf("the linker ignores SIGINT, which thindist was not started ignoring")
	}
	if _, stderr, err := link("bg"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	if !sigint() {
		t.Errorf("started with SIGINT ignored, thindist gave the linker SIGINT's default")
	}

	_, stderr, err = link("bad", "-Wl,--defsym=b=nowhere")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, "symbol not found: nowhere") ||
		strings.Contains(stderr, "thindist link:") || strings.Contains(stderr, "thindist-link:") {
		t.Errorf("a failing small link: %v; want the linker's status 1 and its messages alone:\n%s", err, stderr)
	}
}

// TestFrontPassesOnOtherLinks: the thindist-link front runs every link it
// does not leave to lld as `thindist link`, with the same arguments: a
// link to distribute is distributed (thindist's summary, a working
// program), a bad flag gets thindist link's error and status.
func TestFrontPassesOnOtherLinks(t *testing.T) {
	p := program(t, testprog.Options{Modules: 4, Seed: 3})
	front := filepath.Join(filepath.Dir(thindist), "thindist-link")
	// The tests' environment distributes every link (TestMain).
	cmd := exec.Command(front, append([]string{"--", driver(p), "-O2", "-flto=thin", "-fuse-ld=lld", "-o", "app"}, p.Objects...)...)
	cmd.Dir = p.Dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "thindist: app: 4 jobs, 0 failed") {
		t.Fatalf("%v: %s; want thindist's summary of 4 jobs", err, out)
	}
	got, err := exec.Command(filepath.Join(p.Dir, "app")).Output()
	if err != nil || string(got) != p.Want {
		t.Errorf("the distributed program: %v, %q; want %q", err, got, p.Want)
	}
	if out, err := exec.Command(front, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "thindist-link ") {
		t.Errorf("thindist-link --version: %v, %q; want its own version", err, out)
	}
	cmd = exec.Command(front, "--no-such-flag", "--", driver(p), "-o", "app")
	cmd.Dir = p.Dir
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.HasPrefix(string(out), "thindist link: unknown flag --no-such-flag") {
		t.Errorf("a bad flag: %v: %s; want thindist link's usage error", err, out)
	}
}
