package proc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
)

// Process is a process started by Start.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd as the leader of a new process group that the kernel
// sends deathSignal when thindist dies, however it dies (SIGKILL included),
// so that no compiler or linker outlives it. Wait for it with Wait, not
// cmd.Wait.
//
// Linux sends the parent-death signal when the thread that forked the
// child exits, not the process (see syscall.SysProcAttr.Pdeathsig and
// golang.org/issue/27505), and the Go runtime ends a thread when a
// goroutine locked to it exits. So the process is started and waited for
// from one goroutine locked to its thread for the process's whole life:
// that thread cannot end before the process does.
func Start(cmd *exec.Cmd, deathSignal syscall.Signal) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = deathSignal
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Replaced returns a file the process runs code from (an executable
// mapping in /proc/PID/maps: its program, its shared libraries) that was
// replaced or removed on disk since it was mapped, as a package upgrade
// does; "" if none, or if the process is gone. A long-lived compiler
// process that says one is no longer the compiler on disk.
func (p *Process) Replaced() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.Pid()))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		// address perms offset dev inode path
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(f[1], "x") && strings.HasPrefix(f[5], "/") && strings.HasSuffix(line, " (deleted)") {
			return strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)")
		}
	}
	return ""
}

// Kill kills the process (not its group) with SIGKILL, unless it has
// been waited for.
func (p *Process) Kill() error { return p.cmd.Process.Kill() }

// Wait waits for the process to exit and returns cmd.Wait's error. It may
// be called from several goroutines.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Done is closed once the process has exited and Wait returns.
func (p *Process) Done() <-chan struct{} { return p.done }
