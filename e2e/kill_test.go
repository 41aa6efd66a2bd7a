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
)

// blockedJobs writes a job file of n real clang compiles that cannot end
// on their own: each reads its source from a FIFO that nobody writes. (The
// job file's schema wants a second input, the index shard: an empty file.)
func blockedJobs(t *testing.T, dir string, n int) string {
	t.Helper()
	jf := &jobFile{}
	jf.Common.LinkerOutput = "prog"
	jf.Common.Args = []string{clang, "-c", "-x", "c"}
	jf.Common.Inputs = []string{}
	for i := range n {
		src := fmt.Sprintf("blocked%d.c", i)
		if err := syscall.Mkfifo(filepath.Join(dir, src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, src+".idx"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		jf.Jobs = append(jf.Jobs, job{Args: []string{src, "-o", src + ".o"}, Inputs: []string{src, src + ".idx"}, Outputs: []string{src + ".o"}})
	}
	return jf.write(t, filepath.Join(dir, "blocked.json"))
}

// startWatched starts cmd and returns a channel closed once it has exited and its
// output has been copied.
func startWatched(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	return exited
}

// noneLeft waits for every process carrying tag to end (a generous safety
// net, no threshold), and kills and reports those that do not.
func noneLeft(t *testing.T, tag, after string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = descendants(tag); len(left) == 0 {
			return
		}
	}
	for _, p := range left {
		var pid int
		fmt.Sscan(p, &pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Errorf("processes left running after %s: %q", after, left)
}

// TestDeadThindistLeavesNoCompiler: whether thindist is killed outright
// (SIGKILL: nothing of it runs to clean up) or its terminal hangs up
// (SIGHUP, as for an interrupt), no compiler it started keeps running,
// forked from a fork server or exec'd. A killed run's staging directory is
// removed by the next run in that directory.
func TestDeadThindistLeavesNoCompiler(t *testing.T) {
	needClang(t)
	for _, c := range []struct {
		name  string
		sig   syscall.Signal
		flags []string
	}{
		{"forked-SIGKILL", syscall.SIGKILL, nil},
		{"exec-SIGKILL", syscall.SIGKILL, []string{"--no-fork-server"}},
		{"forked-SIGHUP", syscall.SIGHUP, nil},
		{"exec-SIGHUP", syscall.SIGHUP, []string{"--no-fork-server"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const jobs = 3
			dir := t.TempDir()
			jf := blockedJobs(t, dir, jobs)
			tag := fmt.Sprintf("TD_RUNID=%s-%d-%d", c.name, os.Getpid(), time.Now().UnixNano())
			cmd := exec.Command(thindist, append(c.flags, "--no-cache", fmt.Sprintf("--jobs=%d", jobs), jf)...)
			cmd.Dir = dir
			cmd.Env = testEnv(t, tag)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			exited := startWatched(t, cmd)
			// Every compile runs (forked: beside its server), and nothing
			// else (the fork server's shim being built).
			want := jobs
			if c.flags == nil {
				want++
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				procs := descendants(tag)
				if len(procs) >= want && !strings.Contains(strings.Join(procs, "\n"), "-shared") {
					break
				}
				select {
				case <-exited:
					t.Fatalf("thindist exited:\n%s", out.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the compiles did not start: %q\n%s", procs, out.String())
				}
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			<-exited
			noneLeft(t, tag, "thindist died of "+c.sig.String())
			if c.sig == syscall.SIGHUP {
				if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "interrupted") {
					t.Errorf("after SIGHUP thindist ended with %v (want exit status 130, as for an interrupt):\n%s", cmd.ProcessState, out.String())
				}
				noLeftovers(t, dir)
				return
			}
			if len(leftovers(t, dir)) == 0 {
				t.Fatalf("SIGKILL left no staging directory: the test does not test its removal")
			}
			// The next run in the directory removes the dead run's staging
			// directory (and keeps its own until it is done).
			if err := os.WriteFile(filepath.Join(dir, "small.c"), []byte("int f(void) { return 1; }\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			next := &jobFile{}
			next.Common.LinkerOutput = "prog"
			next.Common.Args = []string{clang, "-c", "-x", "c"}
			next.Common.Inputs = []string{}
			next.Jobs = []job{{Args: []string{"small.c", "-o", "small.o"}, Inputs: []string{"small.c", "blocked0.c.idx"}, Outputs: []string{"small.o"}}}
			if code, msg := runThindist(t, dir, nil, append(c.flags, "--no-cache", next.write(t, filepath.Join(dir, "next.json")))...); code != 0 {
				t.Fatalf("the next run failed (%d):\n%s", code, msg)
			}
			noLeftovers(t, dir)
		})
	}
}
