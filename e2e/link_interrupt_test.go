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

	"github.com/thindist/thindist/internal/testprog"
)

// TestLinkInterrupt interrupts `thindist link` while its thin link or its
// final link runs: thindist exits 130, as for an interrupt anywhere else,
// and no linker keeps running. The linker (a wrapper that execs lld-22)
// blocks reading a response file from a FIFO that nobody writes; lld runs
// as the clang driver's child, so only a signal to its whole process group
// reaches it.
func TestLinkInterrupt(t *testing.T) {
	p := program(t, testprog.Options{Modules: 4, Seed: 23}, "-flto=thin")
	for _, step := range []string{"thin", "final"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "block.rsp")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			pids := filepath.Join(dir, "pids")
			ld := filepath.Join(dir, "ld.lld")
			script := `#!/bin/sh
case "$1" in --version|-v) exec ` + filepath.Join(llvmBin, "ld.lld") + ` "$@";; esac
case "$*" in *--thinlto-index-only*) step=thin;; *) step=final;; esac
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
			args := append([]string{"link", "--", driver(p), "-flto=thin", "-fuse-ld=lld", "--ld-path=" + ld, "-O2"}, p.Objects...)
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
			if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(msg.String(), "interrupted during the "+step) {
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
