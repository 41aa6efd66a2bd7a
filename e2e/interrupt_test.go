package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// descendants lists the live processes whose environment holds tag: every
// process thindist started, however deep.
func descendants(tag string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(tag)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue // a zombie about to be reaped
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return found
}

// interruptCase is one interrupt test: jobs slow backends start, then
// SIGINT goes to thindist's process group (as a terminal's ^C does) or to
// thindist alone (as a build tool that signals only its child does).
type interruptCase struct {
	name       string
	opts       testprog.Options
	jobs       int
	toGroup    bool
	maxStop    time.Duration // how quickly thindist must be gone
	maxWaitFor time.Duration // when the test gives up waiting
}

// runInterrupt runs c and checks that thindist exits non-zero quickly and
// leaves no process and no file behind. It returns thindist's output.
func runInterrupt(t *testing.T, c interruptCase) string {
	t.Helper()
	p := program(t, c.opts)
	fake := fakeCompiler(t, t.TempDir())
	jf := thinLinked(t, p, fake)
	path := jf.write(t, filepath.Join(p.Dir, "job.json"))
	pids := filepath.Join(t.TempDir(), "pids")
	tag := fmt.Sprintf("TD_RUNID=%s-%d-%d", c.name, os.Getpid(), time.Now().UnixNano())

	cmd := exec.Command(thindist, fmt.Sprintf("--jobs=%d", c.jobs), path)
	cmd.Dir = p.Dir
	cmd.Env = testEnv(t, tag, "TD_PIDS="+pids, "TD_SLEEP=60")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, do not leave the group running.
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(pids)
		if len(strings.Fields(string(data))) >= c.jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backends did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let them reach their sleep
	if got := descendants(tag); len(got) < c.jobs {
		t.Fatalf("expected at least %d running backends, found %q", c.jobs, got)
	}
	start := time.Now()
	target := cmd.Process.Pid
	if c.toGroup {
		target = -target
	}
	if err := syscall.Kill(target, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(c.maxWaitFor):
		t.Fatalf("thindist still runs %v after SIGINT:\n%s", c.maxWaitFor, out.String())
	}
	took := time.Since(start)
	if err == nil {
		t.Errorf("thindist exited 0 after SIGINT:\n%s", out.String())
	}
	if took > c.maxStop {
		t.Errorf("thindist took %v to stop after SIGINT", took)
	}
	// Children are reaped asynchronously once orphaned: allow a moment.
	var left []string
	for i := 0; i < 50; i++ {
		if left = descendants(tag); len(left) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes left running after thindist exited: %q", left)
	}
	noLeftovers(t, p.Dir)
	t.Logf("stopped in %v: %s", took, out.String())
	return out.String()
}

// TestInterrupt sends SIGINT to thindist's process group, as a terminal's
// ^C does, while slow backends run: thindist must exit non-zero at once,
// say so, and leave no process and no file behind.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	out := runInterrupt(t, interruptCase{name: "interrupt", opts: testprog.Options{Modules: 6, Seed: 17},
		jobs: 3, toGroup: true, maxStop: 5 * time.Second, maxWaitFor: 10 * time.Second})
	if !strings.Contains(out, "interrupted") {
		t.Errorf("thindist does not say it was interrupted:\n%s", out)
	}
	// The three running backends were stopped, not failed, and the other
	// three never started.
	if !regexp.MustCompile(`thindist: (?:.*?: )?6 jobs, 0 failed, 0 cached, 0 remote, 0 local, 3 stopped, 3 not started in `).MatchString(out) {
		t.Errorf("the summary does not count 3 stopped and 3 not started jobs:\n%s", out)
	}
}

// TestInterruptThindistOnly sends SIGINT to thindist alone (as a build tool
// that signals only its child would): thindist itself must stop the
// compilers it started, including their own children.
func TestInterruptThindistOnly(t *testing.T) {
	t.Parallel()
	runInterrupt(t, interruptCase{name: "interrupt1", opts: testprog.Options{Modules: 4, Seed: 19},
		jobs: 2, maxStop: 8 * time.Second, maxWaitFor: 15 * time.Second})
}
