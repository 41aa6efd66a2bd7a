package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testprog"
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

// TestInterrupt sends SIGINT to thindist's process group, as a terminal's
// ^C does, while slow backends run: thindist must exit non-zero at once,
// leave no process and no file behind.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	p := program(t, testprog.Options{Modules: 6, Seed: 17})
	fake := fakeCompiler(t, t.TempDir())
	jf := thinLinked(t, p, fake)
	path := jf.write(t, filepath.Join(p.Dir, "job.json"))
	pids := filepath.Join(t.TempDir(), "pids")
	tag := fmt.Sprintf("TD_RUNID=interrupt-%d-%d", os.Getpid(), time.Now().UnixNano())

	cmd := exec.Command(thindist, "--jobs=3", path)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), tag, "TD_PIDS="+pids, "TD_SLEEP=60")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Whatever happens, do not leave the group running.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(pids)
		if len(strings.Fields(string(data))) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backends did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let them reach their sleep
	if got := descendants(tag); len(got) < 3 {
		t.Fatalf("expected at least 3 running backends, found %q", got)
	}
	start := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("thindist still runs 10s after SIGINT:\n%s", out.String())
	}
	took := time.Since(start)
	if err == nil {
		t.Fatalf("thindist exited 0 after SIGINT:\n%s", out.String())
	}
	if took > 5*time.Second {
		t.Errorf("thindist took %v to stop after SIGINT", took)
	}
	if !strings.Contains(out.String(), "interrupted") {
		t.Errorf("thindist does not say it was interrupted:\n%s", out.String())
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
}

// TestInterruptThindistOnly sends SIGINT to thindist alone (as a build tool
// that signals only its child would): thindist itself must stop the
// compilers it started, including their own children.
func TestInterruptThindistOnly(t *testing.T) {
	t.Parallel()
	p := program(t, testprog.Options{Modules: 4, Seed: 19})
	fake := fakeCompiler(t, t.TempDir())
	jf := thinLinked(t, p, fake)
	path := jf.write(t, filepath.Join(p.Dir, "job.json"))
	pids := filepath.Join(t.TempDir(), "pids")
	tag := fmt.Sprintf("TD_RUNID=interrupt1-%d-%d", os.Getpid(), time.Now().UnixNano())

	cmd := exec.Command(thindist, "--jobs=2", path)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), tag, "TD_PIDS="+pids, "TD_SLEEP=60")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(pids)
		if len(strings.Fields(string(data))) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backends did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("thindist exited 0 after SIGINT")
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("thindist still runs 15s after SIGINT:\n%s", out.String())
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("thindist took %v to stop after SIGINT", took)
	}
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
}
