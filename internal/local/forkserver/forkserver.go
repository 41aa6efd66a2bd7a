// Package forkserver holds a link's own fork servers (Pool, and its Runner
// in front of exec): what runs a link's compilers when the worker server's
// fork servers (workerserver.ServerForks) do not. It starts a compiler once
// and forks it for every backend job instead of exec'ing it anew.
//
// Debian's clang-22 spends a good part of every process loading, relocating
// and initialising libLLVM and libclang-cpp before main runs: on small
// ThinLTO backends that is most of the job, and it is what makes a
// process-per-backend distributor slower than lld's in-process threads. A
// small shim (shim.c, compiled once with the compiler at hand and loaded
// with LD_PRELOAD) stops the compiler just before its main and serves fork
// requests: each child enters main with the job's argv, environment,
// working directory and output streams, as exec would have started it, in
// a process group of its own, and the shim reports its wait status and
// resource usage. Objects are byte-identical to exec'd ones (tested).
//
// Only dynamically linked ELF executables are served; a server that does
// not say hello (a static compiler, a secure-execution binary that ignores
// LD_PRELOAD) is an error, and callers run the job with exec instead.
package forkserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
)

// ErrUnavailable wraps every error that means "run this job another way":
// the server could not start, has died, or cannot take this request.
var ErrUnavailable = errors.New("fork server unavailable")

// Status is how a forked job ended.
type Status struct {
	ExitCode int    // -1 when killed by a signal
	Signal   string // the signal's name when killed by one
	CPU      time.Duration
	// MaxRSS is the job's peak resident set size in bytes. Linux starts a
	// fork child's high-water mark from the pages fork mapped for it (the
	// server's relocated data and heap), and counts the pages it touches
	// after; pages of the libraries that only the server's start-up touched
	// are not in it. So it is below an exec'd compiler's for the same job.
	MaxRSS int64
}

const (
	msgHello   = 0
	msgStarted = 1
	msgExited  = 2

	fdEnv   = "THINDIST_FORKSERVER_FD"
	initEnv = "THINDIST_FORKSERVER_INIT"
	// requestMax is what one SOCK_SEQPACKET datagram may carry here: the
	// socket's default send buffer is about 208 KiB.
	requestMax = 192 << 10
)

// Server is one running compiler, stopped before main, that forks jobs.
type Server struct {
	conn *net.UnixConn
	proc *proc.Process
	env  []byte // the jobs' environment, encoded once: "K=V\0"... "\0"

	mu     sync.Mutex
	nextID uint32
	byID   map[uint32]*job
	byPid  map[int]*job
	err    error // set once the server is gone
	// stopped is closed once the server and every job it forked have
	// been killed.
	stopped chan struct{}
}

type job struct {
	started  chan struct{} // closed when pid (or startErr) is known
	pid      int
	startErr error
	// abandoned: Run returned (cancelled) before the server said the job
	// started; the reader kills it when it does.
	abandoned bool
	exited    chan exit // buffered, one value
}

type exit struct {
	status    syscall.WaitStatus
	user, sys time.Duration
	maxRSS    int64 // bytes
	err       error // the server died before the job ended
}

// Start starts compiler with the shim preloaded and waits for its hello.
// env is the environment every job gets (the one its libraries were
// initialised under); the server's own is env plus LD_PRELOAD and the
// socket's descriptor.
func Start(ctx context.Context, compiler, shim string, env []string) (*Server, error) {
	if err := checkELF(compiler); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	envBlob, err := encodeEnv(env)
	if err != nil {
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: socketpair: %v", ErrUnavailable, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "forkserver"), os.NewFile(uintptr(fds[1]), "forkserver-shim")
	defer theirs.Close() // closed again right after the start, so EOF tells a dead server
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	conn := fc.(*net.UnixConn)

	cmd := exec.Command(compiler)
	// The server alone binds every symbol at start (LD_BIND_NOW) and runs
	// the compiler's LLVM initialisers (see the shim), so that each job does
	// not redo it: jobs get env, not these.
	cmd.Env = append(withPreload(env, shim), fdEnv+"=3", "LD_BIND_NOW=1")
	if names := initialisers(compiler); len(names) > 0 {
		cmd.Env = append(cmd.Env, initEnv+"="+strings.Join(names, " "))
	}
	cmd.ExtraFiles = []*os.File{theirs}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// The server dies with thindist, and its jobs with it (see the shim).
	// SIGKILL: it holds nothing to clean up.
	p, err := proc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	theirs.Close()
	s := &Server{conn: conn, proc: p, env: envBlob, byID: map[uint32]*job{}, byPid: map[int]*job{}, stopped: make(chan struct{})}

	hello := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		switch {
		case err != nil:
			hello <- err
		case n != 8 || binary.LittleEndian.Uint32(buf) != msgHello:
			hello <- fmt.Errorf("unexpected first message (%d bytes)", n)
		default:
			hello <- nil
		}
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err = <-hello:
	case <-timer.C:
		err = errors.New("no hello in 10s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		p.Kill()
		p.Wait()
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, fmt.Errorf("%w: %s did not start serving (%v) %s", ErrUnavailable, compiler, err, msg)
	}
	go s.read()
	return s, nil
}

// withPreload returns env with shim first in LD_PRELOAD, without the
// variables that Start sets for the server alone.
func withPreload(env []string, shim string) []string {
	out := make([]string, 0, len(env)+1)
	preload := shim
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			if v != "" {
				preload += ":" + v
			}
			continue
		}
		if strings.HasPrefix(kv, fdEnv+"=") || strings.HasPrefix(kv, initEnv+"=") || strings.HasPrefix(kv, "LD_BIND_NOW=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LD_PRELOAD="+preload)
}

// errNotELF marks a compiler that is not an ELF executable (a wrapper
// script): it is exec'd without a word, as expected.
var errNotELF = errors.New("not an ELF executable")

// checkELF refuses what the shim cannot serve faithfully: a script's
// interpreter would take the job's argv[0] for the script.
func checkELF(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != "\x7fELF" {
		return fmt.Errorf("%s: %w", path, errNotELF)
	}
	return nil
}

// read dispatches the shim's messages until the socket closes.
func (s *Server) read() {
	buf := make([]byte, 64)
	var err error
	for {
		var n int
		n, err = s.conn.Read(buf)
		if err != nil {
			break
		}
		m := buf[:n]
		if n < 4 {
			err = fmt.Errorf("short message (%d bytes)", n)
			break
		}
		switch binary.LittleEndian.Uint32(m) {
		case msgStarted:
			if n != 16 {
				err = fmt.Errorf("started message of %d bytes", n)
				break
			}
			id := binary.LittleEndian.Uint32(m[4:])
			pid := int(binary.LittleEndian.Uint32(m[8:]))
			errno := syscall.Errno(binary.LittleEndian.Uint32(m[12:]))
			s.mu.Lock()
			j := s.byID[id]
			delete(s.byID, id)
			switch {
			case j == nil:
			case j.abandoned:
				if pid != 0 {
					syscall.Kill(-pid, syscall.SIGKILL)
				}
			case pid == 0:
				j.startErr = fmt.Errorf("%w: the server could not fork: %v", ErrUnavailable, errno)
				close(j.started)
			default:
				j.pid = pid
				s.byPid[pid] = j
				close(j.started)
			}
			s.mu.Unlock()
		case msgExited:
			if n != 36 {
				err = fmt.Errorf("exited message of %d bytes", n)
				break
			}
			pid := int(binary.LittleEndian.Uint32(m[4:]))
			e := exit{
				status: syscall.WaitStatus(binary.LittleEndian.Uint32(m[8:])),
				user:   time.Duration(binary.LittleEndian.Uint64(m[12:])) * time.Microsecond,
				sys:    time.Duration(binary.LittleEndian.Uint64(m[20:])) * time.Microsecond,
				maxRSS: int64(binary.LittleEndian.Uint64(m[28:])) << 10,
			}
			s.mu.Lock()
			j := s.byPid[pid]
			delete(s.byPid, pid)
			s.mu.Unlock()
			if j != nil {
				j.exited <- e
			}
		default:
			err = fmt.Errorf("unknown message %d", binary.LittleEndian.Uint32(m))
		}
		if err != nil {
			break
		}
	}
	// The server is gone (or speaks nonsense): fail what waits on it. Jobs
	// it had forked lose their parent's report; kill them so that none
	// outlives the run, and let their callers run them again another way.
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("%w: the server stopped: %v", ErrUnavailable, err)
	}
	for id, j := range s.byID {
		j.startErr = s.err
		close(j.started)
		delete(s.byID, id)
	}
	for pid, j := range s.byPid {
		syscall.Kill(-pid, syscall.SIGKILL)
		j.exited <- exit{err: s.err}
		delete(s.byPid, pid)
	}
	s.mu.Unlock()
	s.conn.Close()
	s.proc.Kill()
	close(s.stopped)
	s.proc.Wait()
}

// Gone reports whether the server has died or been closed: it refuses
// every job from then on.
func (s *Server) Gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// Close stops the server; jobs still running are killed.
func (s *Server) Close() {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("%w: closed", ErrUnavailable)
	}
	s.mu.Unlock()
	s.conn.CloseRead()
	s.conn.Close()
	// Killed is enough: nothing it started outlives the run. Waiting for
	// a compiler's exit as well (unmapping it) would delay the end of
	// every link, which waits for Stop; it is reaped in the background.
	<-s.stopped
}

// Job is a command for a server to fork.
type Job struct {
	Argv []string
	Dir  string
	// Stdout and Stderr receive the job's output.
	Stdout, Stderr io.Writer
	// Nice, above 0, runs the job that much lower than the server (which
	// runs at thindist's priority), as nice(1) would start it: the job
	// lowers itself before it starts, so nothing of it runs higher.
	Nice int
}

// Run forks a job: its argv in its directory with the server's environment,
// its stdout and stderr copied to its writers. When ctx ends the job's
// process group gets SIGTERM, and SIGKILL killDelay later. An error
// wrapping ErrUnavailable means the job did not run to completion through
// the server and may be run again another way; ctx's error means it was
// cancelled.
func (s *Server) Run(ctx context.Context, cmd Job, killDelay time.Duration) (Status, error) {
	payload, err := request(cmd, s.env)
	if err != nil {
		return Status{}, err
	}
	out, err := openJobOutput()
	if err != nil {
		return Status{}, err
	}
	j := &job{started: make(chan struct{}), exited: make(chan exit, 1)}
	id, err := s.register(j, payload)
	if err != nil {
		out.closeAll()
		return Status{}, err
	}

	_, _, err = s.conn.WriteMsgUnix(payload, syscall.UnixRights(int(out.outW.Fd()), int(out.errW.Fd())), nil)
	out.copyTo(cmd.Stdout, cmd.Stderr)
	if err != nil {
		s.mu.Lock()
		delete(s.byID, id)
		s.mu.Unlock()
		out.closeReaders(killDelay)
		return Status{}, fmt.Errorf("%w: sending the job: %v", ErrUnavailable, err)
	}
	select {
	case <-j.started:
	case <-ctx.Done():
		// A server that does not answer must not hold up an interrupt.
		s.mu.Lock()
		select {
		case <-j.started: // it answered meanwhile: go on as usual
		default:
			j.abandoned = true
		}
		s.mu.Unlock()
		if j.abandoned {
			out.closeReaders(0) // the job never ran here: nothing to read
			return Status{}, ctx.Err()
		}
	}
	if j.startErr != nil {
		out.closeReaders(killDelay)
		return Status{}, j.startErr
	}

	e := awaitExit(ctx, j, killDelay)
	if ctx.Err() != nil {
		// Whatever of the group ignored SIGTERM.
		syscall.Kill(-j.pid, syscall.SIGKILL)
	}
	out.closeReaders(killDelay)
	if e.err != nil {
		if ctx.Err() != nil {
			return Status{}, ctx.Err()
		}
		return Status{}, e.err
	}
	st := Status{ExitCode: e.status.ExitStatus(), CPU: e.user + e.sys, MaxRSS: e.maxRSS}
	if e.status.Signaled() {
		st.ExitCode, st.Signal = -1, e.status.Signal().String()
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	return st, nil
}

// register gives j the next job id, writes it at the start of payload and
// makes j the job the server's reports for that id go to. It returns the
// server's error, registering nothing, once the server has failed.
func (s *Server) register(j *job, payload []byte) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.nextID++
	id := s.nextID
	binary.LittleEndian.PutUint32(payload, id)
	s.byID[id] = j
	return id, nil
}

// awaitExit waits for j's exit report. When ctx ends first, j's process
// group gets SIGTERM, then SIGKILL killDelay later; a report that still
// does not come killDelay after that is an ErrUnavailable error.
func awaitExit(ctx context.Context, j *job, killDelay time.Duration) exit {
	var e exit
	select {
	case e = <-j.exited:
	case <-ctx.Done():
		syscall.Kill(-j.pid, syscall.SIGTERM)
		timer := time.NewTimer(killDelay)
		select {
		case e = <-j.exited:
		case <-timer.C:
			syscall.Kill(-j.pid, syscall.SIGKILL)
			// The kill cannot fail to end it; only a server that stopped
			// answering can keep its report: do not wait for that forever.
			timer.Reset(killDelay)
			select {
			case e = <-j.exited:
			case <-timer.C:
				e = exit{err: fmt.Errorf("%w: no report of the killed job %d", ErrUnavailable, j.pid)}
			}
		}
		timer.Stop()
	}
	return e
}

// jobOutput is the pair of pipes a job's stdout and stderr go through: the
// write ends are sent to the server with the job, the read ends copied to
// the job's writers.
type jobOutput struct {
	outR, outW, errR, errW *os.File
	copied                 chan struct{} // one per read end copied to its end
}

// openJobOutput creates the pipes.
func openJobOutput() (*jobOutput, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	return &jobOutput{outR: outR, outW: outW, errR: errR, errW: errW, copied: make(chan struct{}, 2)}, nil
}

// closeAll closes the four ends, for a job that was never sent.
func (o *jobOutput) closeAll() {
	o.outR.Close()
	o.outW.Close()
	o.errR.Close()
	o.errW.Close()
}

// copyTo closes the write ends (the server holds its own copies once the
// job is sent) and copies the read ends to stdout and stderr until they
// end or closeReaders closes them.
func (o *jobOutput) copyTo(stdout, stderr io.Writer) {
	o.outW.Close()
	o.errW.Close()
	drain := func(w io.Writer, r *os.File) {
		io.Copy(w, r)
		o.copied <- struct{}{}
	}
	go drain(stdout, o.outR)
	go drain(stderr, o.errR)
}

// closeReaders waits up to wait for both copies to end, then closes the
// read ends.
func (o *jobOutput) closeReaders(wait time.Duration) {
	// A grandchild that keeps the pipes open (a wrapper's daemon) must
	// not hold the job forever: what it writes later is lost.
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for range 2 {
		select {
		case <-o.copied:
		case <-timer.C:
			o.outR.Close()
			o.errR.Close()
			<-o.copied
		}
	}
	o.outR.Close()
	o.errR.Close()
}

// request encodes a job, leaving room for its id: its niceness, the
// directory, argv and the encoded environment. Strings are NUL-terminated
// and each list ends with an empty one, so an empty argument cannot be sent
// (it would end argv early): such a job runs another way.
func request(cmd Job, env []byte) ([]byte, error) {
	argv, dir := cmd.Argv, cmd.Dir
	if len(argv) == 0 {
		return nil, errors.New("forkserver: empty argv")
	}
	n := 8 + len(dir) + 2 + len(env)
	for _, a := range argv {
		n += len(a) + 1
	}
	if n > requestMax {
		return nil, fmt.Errorf("%w: the job's arguments and environment take %d bytes, over %d", ErrUnavailable, n, requestMax)
	}
	b := make([]byte, 8, n)
	binary.LittleEndian.PutUint32(b[4:], uint32(max(0, cmd.Nice)))
	for i, a := range append([]string{dir}, argv...) {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: a NUL byte in %q", ErrUnavailable, a)
		}
		if a == "" && i > 0 {
			return nil, fmt.Errorf("%w: an empty argument", ErrUnavailable)
		}
		b = append(append(b, a...), 0)
	}
	return append(append(b, 0), env...), nil
}

// encodeEnv encodes the jobs' environment for every request.
func encodeEnv(env []string) ([]byte, error) {
	var b []byte
	for _, kv := range env {
		if kv == "" {
			continue
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("%w: a NUL byte in the environment entry %q", ErrUnavailable, kv)
		}
		b = append(append(b, kv...), 0)
	}
	b = append(b, 0)
	if len(b) > requestMax/2 {
		return nil, fmt.Errorf("%w: the environment takes %d bytes, over %d", ErrUnavailable, len(b), requestMax/2)
	}
	return b, nil
}
