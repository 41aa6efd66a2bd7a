package worker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
)

// process is one running thindist-worker, serving one job at a time:
// started by this process (p), or lent by the per-user server (lent; see
// Loan), whose ending it can only ask for.
type process struct {
	p    *proc.Process
	lent *lent
	in   *os.File
	outF *os.File
	out  *bufio.Reader
	jobs int   // jobs run so far
	peak int64 // peak RSS in bytes, as of its last job
}

// lent is what a borrowed worker has instead of its process: its pid and
// how to have its lender kill it.
type lent struct {
	pid   int
	abort func()
}

func (w *process) pid() int {
	if w.lent != nil {
		return w.lent.pid
	}
	return w.p.Pid()
}

// answer is how a job the worker ran ended; declined, when not empty, says
// why the worker did not start it.
type answer struct {
	declined       string
	status         int
	maxRSS         int64
	cpu            time.Duration
	stdout, stderr []byte
}

// start starts the worker at path. It dies with thindist (SIGKILL), leads a
// process group of its own, and its own standard error goes nowhere: each
// job's is captured separately.
func start(path string) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(path, "--serve")
	cmd.Stdin, cmd.Stdout = inR, outW
	p, err := proc.Start(cmd, syscall.SIGKILL)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return &process{p: p, in: inW, outF: outR, out: bufio.NewReaderSize(outR, 64<<10)}, nil
}

// do runs one job and waits for its answer. An error means the worker
// died or broke the protocol: it must be killed.
func (w *process) do(dir string, argv, env []string) (*answer, error) {
	req := make([]string, 0, 2+len(argv)+len(env))
	req = append(req, dir, strconv.Itoa(len(argv)))
	req = append(req, argv...)
	req = append(req, env...)
	if err := WriteMessage(w.in, req); err != nil {
		return nil, err
	}
	f, err := ReadMessage(w.out, 16)
	if err != nil {
		return nil, err
	}
	w.jobs++
	switch {
	case len(f) == 2 && f[0] == "decline":
		return &answer{declined: f[1]}, nil
	case len(f) == 6 && f[0] == "done":
		status, err1 := strconv.Atoi(f[1])
		kib, err2 := strconv.ParseInt(f[2], 10, 64)
		us, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("malformed answer %q", f[:4])
		}
		w.peak = kib << 10
		return &answer{status: status, maxRSS: kib << 10, cpu: time.Duration(us) * time.Microsecond,
			stdout: []byte(f[4]), stderr: []byte(f[5])}, nil
	}
	return nil, fmt.Errorf("malformed answer of %d fields", len(f))
}

// rss is the worker's resident set size now, in bytes; 0 if unknown.
func (w *process) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", w.pid()))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// kill kills the worker's process group (a lent worker's lender does);
// wait for it with wait.
func (w *process) kill() {
	if w.lent != nil {
		w.lent.abort()
		return
	}
	syscall.Kill(-w.p.Pid(), syscall.SIGKILL)
}

// close ends an idle worker: it exits when its input ends.
func (w *process) close() {
	w.in.Close()
	select {
	case <-w.p.Done():
	case <-time.After(time.Second):
		w.kill()
	}
	w.wait()
}

// wait waits for the worker to exit, releases its pipes and says how it
// ended ("signal: killed", "exit status 70").
func (w *process) wait() string {
	w.in.Close()
	err := w.p.Wait()
	w.outF.Close()
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
