package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSmallLinkBecomesTheLinker: `thindist link` leaves a link with less
// bitcode than --in-process-below to lld by replacing itself with the link
// command, which then runs as thindist's process, exactly as given: the
// program is the one the command makes by itself, and a failing link
// fails with the linker's status and messages alone. Started with SIGINT
// ignored (a build in the background), the linker ignores it too.
func TestSmallLinkBecomesTheLinker(t *testing.T) {
	needClang(t)
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
		args := append([]string{"link", "--in-process-below=1M", "--", "./cc", "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", out}, extra...)
		cmd := exec.Command(thindist, args...)
		if out == "bg" { // as a shell starts a background job
			cmd = exec.Command("/bin/sh", append([]string{"-c", `trap '' INT; exec "$0" "$@"`, thindist}, args...)...)
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
		t.Errorf("the link ran as process %v; thindist was %d: it did not become the link", pids, cmd.Process.Pid)
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
		strings.Contains(stderr, "thindist link:") {
		t.Errorf("a failing small link: %v; want the linker's status 1 and its messages alone:\n%s", err, stderr)
	}
}
