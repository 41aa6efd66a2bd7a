package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestLinkInterrupt interrupts `thindist link` while its thin link or its
// final link runs (--separate-thin-link), or while its one lld process runs:
// thindist exits 130, as for an interrupt anywhere else, and no linker keeps
// running. The linker (a wrapper that execs lld-22) blocks reading a
// response file from a FIFO that nobody writes; lld runs as the clang
// driver's child, so only a signal to its whole process group reaches it.
func TestLinkInterrupt(t *testing.T) {
	p := program(t, testprog.Options{Modules: 4, Seed: 23}, "-flto=thin")
	for _, step := range []string{"thin", "final", "one"} {
		t.Run(step, func(t *testing.T) {
			phase, flags := step, []string{"--separate-thin-link"}
			if step == "one" {
				phase, flags = "link (lld", nil // the one lld process
			}
			dir := t.TempDir()
			fifo := filepath.Join(dir, "block.rsp")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			pids := filepath.Join(dir, "pids")
			ld := filepath.Join(dir, "ld.lld")
			script := `#!/bin/sh
case "$1" in --version|-v) exec ` + filepath.Join(llvmBin, "ld.lld") + ` "$@";; esac
case "$*" in *--thinlto-index-only*) step=thin;; *--thinlto-distributor=*) step=one;; *) step=final;; esac
if [ "$step" = ` + step + ` ]; then
  echo $$ > ` + pids + `.tmp && mv ` + pids + `.tmp ` + pids + `
  exec ` + filepath.Join(llvmBin, "ld.lld") + ` "$@" @` + fifo + `
fi
exec ` + filepath.Join(llvmBin, "ld.lld") + ` "$@"
`
			if err := os.WriteFile(ld, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			out := "prog-" + step
			tag := fmt.Sprintf("TD_RUNID=link-%s-%d-%d", step, os.Getpid(), time.Now().UnixNano())
			args := append(append([]string{"link"}, flags...), "--", driver(p), "-flto=thin", "-fuse-ld=lld", "--ld-path="+ld, "-O2")
			args = append(args, p.Objects...)
			cmd := exec.Command(thindist, append(args, "-o", out)...)
			cmd.Dir = p.Dir
			cmd.Env = testEnv(t, tag)
			var msg bytes.Buffer
			cmd.Stdout, cmd.Stderr = &msg, &msg
			exited := startWatched(t, cmd)
			// Wait for lld to block on the FIFO.
			var lld string
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
				b, _ := os.ReadFile(pids)
				if pid := strings.TrimSpace(string(b)); pid != "" {
					c, _ := os.ReadFile("/proc/" + pid + "/cmdline")
					if bytes.Contains(c, []byte("@"+fifo)) {
						lld = pid
						break
					}
				}
				select {
				case <-exited:
					t.Fatalf("thindist link exited before the %s link:\n%s", step, msg.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("lld did not start the %s link:\n%s", step, msg.String())
				}
			}
			// As a build tool interrupts its child: thindist alone.
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("thindist link still runs after SIGINT:\n%s", msg.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(msg.String(), "interrupted during the "+phase) {
				t.Errorf("interrupted during the %s link: exit status %d, want 130:\n%s", step, code, msg.String())
			}
			noneLeft(t, tag, "an interrupt during the "+step+" link (lld was "+lld+")")
			for _, f := range []string{out, out + ".thindist.d"} {
				if _, err := os.Stat(filepath.Join(p.Dir, f)); err == nil {
					t.Errorf("%s left behind", f)
				}
			}
			noLeftovers(t, p.Dir)
		})
	}
}

// TestLinkKilledWhileLLDWaits kills `thindist link` outright (SIGKILL: none
// of it runs to clean up) while lld, linking in one process, waits for the
// backends: the lld the clang driver started is not thindist's child and
// outlives it, but its distributor reads the answer from a pipe only
// thindist could write, so it fails at once and lld with it, instead of
// waiting for good. Nothing of the link keeps running, and no output is
// written.
func TestLinkKilledWhileLLDWaits(t *testing.T) {
	p := program(t, testprog.Options{Modules: 4, Seed: 29}, "-flto=thin")
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	slow := filepath.Join(dir, "slow-clang")
	script := "#!/bin/sh\ncase \"$*\" in *-fthinlto-index=*) : > " + started + "; exec sleep 600;; esac\n" +
		"exec " + filepath.Join(llvmBin, "clang") + " \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("TD_RUNID=link-killed-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := append([]string{"link", "--compiler=" + slow, "--", driver(p), "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
	cmd := exec.Command(thindist, append(args, "-o", "prog-killed")...)
	cmd.Dir = p.Dir
	cmd.Env = testEnv(t, tag)
	// A file, not a pipe: lld inherits thindist's output, and waiting for
	// thindist must not wait for lld.
	msg, err := os.Create(filepath.Join(dir, "messages"))
	if err != nil {
		t.Fatal(err)
	}
	defer msg.Close()
	cmd.Stdout, cmd.Stderr = msg, msg
	messages := func() string { b, _ := os.ReadFile(msg.Name()); return string(b) }
	exited := startWatched(t, cmd)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("thindist link exited before its backends ran:\n%s", messages())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend started:\n%s", messages())
		}
	}
	if rsp, err := os.ReadFile(filepath.Join(p.Dir, "prog-killed.thindist.d", "link.rsp")); !bytes.Contains(rsp, []byte("--thinlto-distributor=")) {
		t.Fatalf("the link does not run as one lld process with thindist as its distributor: %v", err)
	}
	cmd.Process.Kill()
	<-exited
	noneLeft(t, tag, "thindist link was killed while lld waited for its backends")
	if _, err := os.Stat(filepath.Join(p.Dir, "prog-killed")); err == nil {
		t.Error("the killed link wrote its output")
	}
}
