// Package workerserver holds the per-user server that keeps workers and
// fork servers warm across links, and a link's use of it (LinkWorkers,
// ServerForks, before the link's own runners): use those when the server
// is on.
//
// The per-user server (`thindist server run`, started on demand by a
// link) owns a worker.Pool and runs the jobs its clients send over a Unix socket
// in a directory of the user's alone; the Client is the worker.Workers a
// link uses in place of a Pool of its own.
//
// Each installation of thindist has a server of its own (InstallDir). The
// server serves its own user only (SO_PEERCRED), and links of its own
// identity only (thindist and the worker, see Identity): a link of its
// installation but another identity (a rebuild) makes it stop accepting
// and exit once its connections end, and the link starts a new one. It exits after its idle period without a
// connection. The compiler check is the Pool's, so it is paid once per
// compiler file, not once per link.
package workerserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/sys/lockfile"
	"golang.org/x/sys/unix"
)

// The server's files in its directory. The lock serialises starting a
// server (clients) with one ending for idleness (the server).
const (
	sockName = "server.sock"
	lockName = "server.lock"
	logName  = "server.log"
)

// maxRequestFields bounds a job request: its argv and environment.
const maxRequestFields = 1 << 16

// Options configure a server.
type Options struct {
	Dir    string        // the user's server directory, which must be the user's alone
	Worker string        // the thindist-worker executable
	Idle   time.Duration // it exits after this long without a connection
}

type server struct {
	o     Options
	id    Identity
	pool  *worker.Pool
	forks *forks
	ln    *net.UnixListener
	begin time.Time
	log   *log.Logger
	// ctx ends when the server is stopped: the running jobs' workers are
	// killed, and their clients rerun the jobs by exec.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   int
	links   map[string]int // open connections of each link being served
	served  int            // links served
	refused int            // connections of other users
	stale   string         // why it accepts no more connections
	idle    *time.Timer
	// active is when the last link's connection ended (at first, when
	// the server started): the idle period counts from then, so that a
	// status query does not keep the server alive.
	active  time.Time
	exit    chan struct{} // closed when Serve should return
	exiting bool
}

// Serve runs the server of its installation (InstallDir) in o.Dir until
// its idle period passes without a connection, it is stopped, a link of
// its installation but another identity comes and its connections end, or
// ctx ends. Its log is server.log in its directory. The process that runs
// it should first CloseInherited.
func Serve(ctx context.Context, o Options) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	id, err := Own(exe, o.Worker)
	if err != nil {
		return err
	}
	if o.Dir, err = installDir(o.Dir, id); err != nil {
		return err
	}
	logf, err := openLog(filepath.Join(o.Dir, logName))
	if err != nil {
		return err
	}
	defer logf.Close()
	ln, err := listen(filepath.Join(o.Dir, sockName))
	if err != nil {
		return err
	}
	now := time.Now()
	s := &server{o: o, id: id, ln: ln, begin: now, active: now, links: map[string]int{}, exit: make(chan struct{}),
		log:  log.New(logf, fmt.Sprintf("[%d] ", os.Getpid()), log.LstdFlags|log.Lmicroseconds),
		pool: worker.NewPool(worker.Options{Path: id.Worker.Path, MaxIdle: max(runtime.NumCPU(), 2)})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.forks = newForks(s.ctx, o.Dir, s.log)
	s.log.Printf("serving %s: thindist %s, %s; worker %s; idle period %s", ln.Addr(), id.Version, id.Thindist, id.Worker, o.Idle)
	s.idle = time.AfterFunc(o.Idle, s.idleExit)
	go s.accept()
	select {
	case <-ctx.Done():
		s.closeListener("signalled")
	case <-s.exit:
	}
	s.cancel()
	s.pool.Close()
	s.forks.close()
	st := s.pool.Stats()
	_, forked := s.forks.stats()
	s.log.Printf("exiting: %d links served, %d jobs on workers, %d forked, %d workers started", s.served, st.Jobs, forked, st.Started)
	return nil
}

// CloseInherited closes the descriptors this process inherited beyond its
// standard streams (make's jobserver pipe, a CI runner's): the server
// outlives the link that started it and must not hold them open. Go opens
// every descriptor of its own close-on-exec, so those are the others.
func CloseInherited() {
	des, _ := os.ReadDir("/proc/self/fd")
	for _, de := range des {
		fd, err := strconv.Atoi(de.Name())
		if err != nil || fd < 3 {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// listen listens at path, unless a server answers there already. A socket
// file left by a server that was killed is replaced.
func listen(path string) (*net.UnixListener, error) {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("a server already listens at %s", path)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// openLog opens the server's log for appending, emptied first once it has
// grown past 1 MiB.
func openLog(path string) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if fi, err := os.Stat(path); err == nil && fi.Size() > 1<<20 {
		flags |= os.O_TRUNC
	}
	return os.OpenFile(path, flags, 0o600)
}

func (s *server) accept() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		s.conns++
		s.idle.Stop()
		s.mu.Unlock()
		go s.serve(c)
	}
}

// idleExit ends the server once its idle period has passed without a
// connection. It holds the lock a starting client takes, so that a client
// either reaches this server before its socket goes, or starts another.
func (s *server) idleExit() {
	lockfile.With(filepath.Join(s.o.Dir, lockName), func() error {
		s.mu.Lock()
		idle := s.conns == 0
		s.mu.Unlock()
		if idle {
			s.closeListener(fmt.Sprintf("no connection for %s", s.o.Idle))
		}
		return nil
	})
}

// closeListener stops accepting connections (its socket file is removed
// with the listener) and has Serve return once none is left.
func (s *server) closeListener(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale == "" {
		s.stale = why
		s.ln.Close()
		s.log.Printf("no more connections: %s", why)
	}
	if s.conns == 0 {
		s.exitLocked()
	}
}

func (s *server) exitLocked() {
	if !s.exiting {
		s.exiting = true
		close(s.exit)
	}
}

// serve answers one connection: refused if another user's, else a status
// or stop request, or a link's hello and then its jobs one by one.
func (s *server) serve(c *net.UnixConn) {
	link := ""
	defer s.left(c, &link)
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		why := fmt.Sprintf("this thindist server serves user %d only; you are user %d", os.Getuid(), uid)
		if err != nil {
			why = fmt.Sprintf("this thindist server serves user %d only; your credentials are unknown (%v)", os.Getuid(), err)
		}
		s.log.Printf("refused a connection: %s", why)
		worker.WriteMessage(c, []string{"refused", why})
		return
	}
	r := bufio.NewReader(c)
	f, err := worker.ReadMessage(r, 16)
	if err != nil || len(f) == 0 {
		return
	}
	switch f[0] {
	case "status":
		worker.WriteMessage(c, []string{"status", string(s.status())})
	case "stop":
		s.log.Printf("stopped by a client")
		worker.WriteMessage(c, []string{"stopping", strconv.Itoa(os.Getpid())})
		s.stop()
	case "hello":
		var why string
		if link, why = s.hello(f[1:]); why != "" {
			worker.WriteMessage(c, []string{"stale", why})
			return
		}
		if worker.WriteMessage(c, []string{"ok", strconv.Itoa(os.Getpid())}) == nil {
			s.jobs(c, r)
		}
	}
}

// hello admits a link whose hello is f ([link, identity...]) and returns
// its name, or says why not: another identity than the server's, or the
// workers' files replaced on disk. Either makes the server stale: it
// accepts no other connection, and exits once the ones it has end.
func (s *server) hello(f []string) (link, why string) {
	if len(f) < 1 {
		return "", "a malformed hello"
	}
	id, err := parseIdentity(f[1:])
	if err != nil {
		return "", err.Error()
	}
	why = s.id.differs(id)
	if why == "" {
		why = s.pool.Changed()
	}
	if why == "" {
		why = s.forks.changed()
	}
	s.mu.Lock()
	if why == "" && s.stale != "" {
		why = "this server is exiting: " + s.stale
	}
	if why == "" {
		if s.links[f[0]] == 0 {
			s.served++
		}
		s.links[f[0]]++
	}
	s.mu.Unlock()
	if why != "" {
		s.closeListener(why)
		return "", why
	}
	return f[0], ""
}

// left ends connection c of link ("" if none): with no connection left
// the idle period runs from the end of the last link's connection, or
// Serve returns if the server is stale.
func (s *server) left(c *net.UnixConn, link *string) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if *link != "" {
		if s.links[*link]--; s.links[*link] == 0 {
			delete(s.links, *link)
		}
		s.active = time.Now()
	}
	if s.conns--; s.conns == 0 {
		if s.stale != "" {
			s.exitLocked()
		} else {
			s.idle.Reset(max(0, s.o.Idle-time.Since(s.active)))
		}
	}
}

// stop ends the server now: its running jobs' workers are killed (their
// clients rerun them by exec).
func (s *server) stop() {
	s.closeListener("stopped")
	s.mu.Lock()
	s.exitLocked()
	s.mu.Unlock()
	s.cancel()
}

// jobs runs the jobs of one connection, one at a time, until it ends. A
// connection that ends mid-job (its link's context ended) kills the job's
// worker, or its forked compiler.
func (s *server) jobs(c *net.UnixConn, r *bufio.Reader) {
	reqs, gone, quit := make(chan []string), make(chan struct{}), make(chan struct{})
	defer close(quit)
	go func() {
		defer close(gone)
		for {
			f, err := worker.ReadMessage(r, maxRequestFields)
			if err != nil {
				return
			}
			select {
			case reqs <- f:
			case <-quit:
				return
			}
		}
	}()
	for {
		var f []string
		select {
		case <-gone:
			return
		case f = <-reqs:
		}
		ctx, cancel := context.WithCancel(s.ctx)
		go func() {
			select {
			case <-gone:
			case <-ctx.Done():
			}
			cancel()
		}()
		if len(f) > 0 && f[0] == "lease" {
			ok := s.lend(ctx, c, f, reqs, gone)
			cancel()
			if !ok {
				return
			}
			continue
		}
		answer, err := s.run(ctx, f)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Printf("%v", err)
			}
			return
		}
		if worker.WriteMessage(c, answer) != nil {
			return
		}
	}
}

// lend lends a worker to the link of connection c for the job request f
// (["lease", dir, argc, argv..., env...], the first job the link would run
// on it), so that the link runs its jobs on the worker itself: the answer
// is ["leased", pid, jobs left, started] with the worker's standard input and
// output attached (SCM_RIGHTS; and a pidfd), or ["elsewhere", why]. The worker is the
// link's until it sends ["return", jobs run, peak RSS]; should the
// connection end first, send anything else, or the server be stopped, the
// worker is killed, as it may be mid-job. lend reports whether the
// connection may go on.
func (s *server) lend(ctx context.Context, c *net.UnixConn, f []string, reqs <-chan []string, gone <-chan struct{}) bool {
	dir, argv, env, err := parseCommand("lease", f[1:])
	if err != nil {
		s.log.Printf("%v", err)
		return false
	}
	l, why := s.pool.Lend(ctx, argv[0], dir, env)
	if l == nil {
		return worker.WriteMessage(c, []string{"elsewhere", why}) == nil
	}
	if err := sendLoan(c, l); err != nil {
		s.log.Printf("lending a worker: %v", err)
		l.Revoke()
		return false
	}
	select {
	case <-gone:
	case <-s.ctx.Done():
	case r := <-reqs:
		jobs, peak, err := parseReturn(r)
		if err == nil {
			l.Return(jobs, peak)
			return true
		}
		s.log.Printf("a link with a worker lent: %v; the worker is killed", err)
	}
	l.Revoke()
	return false
}

// sendLoan writes the answer to a lease, the loan's pipes attached, and a
// pidfd of the worker when the kernel makes one: with it the link can
// kill the worker itself should the server not answer (stopped), with no
// risk of signalling another process that reused its pid.
func sendLoan(c *net.UnixConn, l *worker.Loan) error {
	var msg bytes.Buffer
	worker.WriteMessage(&msg, []string{"leased", strconv.Itoa(l.PID()), strconv.Itoa(l.JobsLeft()), flag(l.Started)})
	in, out := l.Pipes()
	var err error
	cerr := withFD(in, func(inFD int) {
		err = withFD(out, func(outFD int) {
			fds := []int{inFD, outFD}
			if pidfd, perr := unix.PidfdOpen(l.PID(), 0); perr == nil {
				defer unix.Close(pidfd)
				fds = append(fds, pidfd)
			}
			var n int
			n, _, err = c.WriteMsgUnix(msg.Bytes(), unix.UnixRights(fds...), nil)
			if err == nil && n < msg.Len() {
				_, err = c.Write(msg.Bytes()[n:])
			}
		})
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// withFD calls fn with f's descriptor, leaving f as it is (os.File.Fd
// would make it blocking).
func withFD(f *os.File, fn func(fd int)) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return raw.Control(func(fd uintptr) { fn(int(fd)) })
}

// run runs a link's fork request and returns its answer; an error ends
// the connection.
func (s *server) run(ctx context.Context, f []string) ([]string, error) {
	c, err := parseFork(f)
	if err != nil {
		return nil, err
	}
	st, stdout, stderr, err := s.forks.run(ctx, c)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return encodeForked(forked{elsewhere: err.Error()}), nil
	}
	return encodeForked(forked{st: st, stdout: stdout, stderr: stderr}), nil
}

// peerUID is the user of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}
