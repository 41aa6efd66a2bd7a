package forkserver

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
)

//go:embed shim/shim.c
var shimSource []byte

// BuildShim compiles the shim with cc (any clang or gcc driver) into dir,
// once per shim source: dir/forkserver-<hash>.so, written under a
// temporary name and renamed, so concurrent links never see half a file.
func BuildShim(ctx context.Context, cc, dir string) (string, error) {
	// Keyed by the compiler too: a compiler whose default target is not
	// this machine builds a shim that cannot load, and must not spoil
	// another's.
	h := sha256.New()
	h.Write(shimSource)
	h.Write([]byte("\x00" + cc))
	so := filepath.Join(dir, "forkserver-"+hex.EncodeToString(h.Sum(nil)[:8])+".so")
	if _, err := os.Stat(so); err == nil {
		if checkSharedObject(so) == nil {
			return so, nil
		}
		os.Remove(so) // left by an older thindist that did not check
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// The compiler's own temporaries (the object between compiling and
	// linking) go to a directory of ours, removed whatever happens: a
	// compiler killed by a cancelled link leaves them in TMPDIR otherwise.
	work, err := os.MkdirTemp(dir, "forkserver-build-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	src, tmp := filepath.Join(work, "shim.c"), filepath.Join(work, "shim.so")
	if err := os.WriteFile(src, shimSource, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := &proc.Cmd{Argv: []string{cc, "-shared", "-fPIC", "-O2", "-o", tmp, src, "-ldl"},
		Env: append(os.Environ(), "TMPDIR="+work)}
	res, err := proc.Exec{}.Run(ctx, cmd)
	if err == nil && res.Failed() {
		err = errors.New(res.Status())
	}
	if err != nil {
		var out []byte
		if res != nil {
			out = append(res.Stderr, res.Stdout...)
		}
		return "", fmt.Errorf("building the fork-server shim with %s: %w\n%s", cc, err, out)
	}
	// An exit status proves nothing (a wrapper or a stand-in compiler may
	// exit 0 having written anything): keep only a shared object for this
	// machine, or every later run would try to preload a broken one.
	if err := checkSharedObject(tmp); err != nil {
		return "", fmt.Errorf("building the fork-server shim with %s: %w", cc, err)
	}
	if err := os.Rename(tmp, so); err != nil {
		return "", err
	}
	return so, nil
}

// hostMachine is the ELF machine of the processes thindist starts.
var hostMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386, "riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "loong64": elf.EM_LOONGARCH,
}[runtime.GOARCH]

// checkSharedObject accepts an ELF shared object for this machine.
func checkSharedObject(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("it wrote no ELF shared object: %v", err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return fmt.Errorf("it wrote an ELF %v, not a shared object", f.Type)
	}
	if hostMachine != elf.EM_NONE && f.Machine != hostMachine {
		return fmt.Errorf("it wrote a shared object for %v, not %v", f.Machine, hostMachine)
	}
	return nil
}

// Pool keeps one server per compiler, started on first use. A compiler
// whose server cannot start is remembered and never tried again in the
// run. The zero Pool is not usable; see NewPool.
type Pool struct {
	// CC builds the shim when the first compiler cannot (it is not a C
	// compiler driver); "" means cc from PATH.
	CC string

	dir  string   // where the shim is built
	env  []string // the jobs' environment
	warn func(format string, args ...any)

	mu      sync.Mutex
	shim    string
	shimErr error
	servers map[string]*entry
	running []*Server // the servers started
	stats   Stats
}

// Stats are a pool's figures for a run.
type Stats struct {
	// Servers is how many servers started.
	Servers int
	// Startup is the time they took to start (building the shim when
	// needed, starting the compiler up to main): paid once per compiler,
	// outside any job's time.
	Startup time.Duration
}

// Stats returns the pool's figures so far.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

type entry struct {
	once sync.Once
	srv  *Server
	err  error
}

// NewPoolIn returns the pool that forks local compilers with environment
// environ, and the func that closes it; nil, with a warning, when no
// directory can hold its shim. The shim is built once in cacheDir's
// forkserver directory (also under --no-cache: it is not a cached
// result), else in a private temporary directory removed at the end;
// never in a directory others can write, since whatever is there is
// preloaded into the compiler.
func NewPoolIn(cacheDir string, environ []string, warn func(string, ...any)) (*Pool, func()) {
	shimDir, cleanup := filepath.Join(cacheDir, "forkserver"), func() {}
	if err := os.MkdirAll(shimDir, 0o755); err != nil {
		tmp, err := os.MkdirTemp("", "thindist-forkserver-")
		if err != nil {
			warn("not forking compilers: %v", err)
			return nil, func() {}
		}
		shimDir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	pool := NewPool(shimDir, environ, warn)
	return pool, func() { pool.Close(); cleanup() }
}

// NewPool returns a pool that builds its shim in dir and runs every job
// with environment env. warn, if not nil, hears once per compiler why it is
// exec'd after all.
func NewPool(dir string, env []string, warn func(string, ...any)) *Pool {
	return &Pool{dir: dir, env: env, warn: warn, servers: map[string]*entry{}}
}

// Run runs cmd through the server of its argv[0] with the pool's
// environment. See Server.Run; errors wrapping ErrUnavailable mean the
// caller should exec the job itself.
func (p *Pool) Run(ctx context.Context, cmd Job, killDelay time.Duration) (Status, error) {
	srv, err := p.Server(ctx, cmd.Argv[0])
	if err != nil {
		return Status{}, err
	}
	return srv.Run(ctx, cmd, killDelay)
}

// Server returns the server of compiler, starting it on first use (the
// callers that ask meanwhile wait for that start). Servers are keyed as
// the jobs spell the compiler so that a job costs a map lookup; the path
// is resolved (exec.LookPath when it has no slash) once, when the server
// starts. Errors wrapping ErrUnavailable mean the caller should exec the
// job itself.
func (p *Pool) Server(ctx context.Context, compiler string) (*Server, error) {
	p.mu.Lock()
	e := p.servers[compiler]
	if e == nil {
		e = &entry{}
		p.servers[compiler] = e
	}
	p.mu.Unlock()
	e.once.Do(func() {
		path, err := exec.LookPath(compiler)
		if err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			e.err = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return
		}
		// Refuse scripts before anything runs them: building the shim with
		// a wrapper script would also run the wrapper.
		if err := checkELF(path); err != nil {
			e.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			return
		}
		began := time.Now()
		var shim string
		if shim, e.err = p.buildShim(ctx, path); e.err == nil {
			e.srv, e.err = Start(ctx, path, shim, p.env)
		}
		if e.err == nil {
			p.mu.Lock()
			p.running = append(p.running, e.srv)
			p.stats.Servers++
			p.stats.Startup += time.Since(began)
			p.mu.Unlock()
		}
		if e.err != nil && p.warn != nil && ctx.Err() == nil && !errors.Is(e.err, errNotELF) {
			p.warn("%v; running it with exec (--no-fork-server skips the attempt and this warning)", e.err)
		}
	})
	if e.err != nil {
		return nil, e.err
	}
	return e.srv, nil
}

// buildShim builds the shim once per pool, with the first compiler that
// asks (clang is a C compiler driver too), else with cc from PATH.
func (p *Pool) buildShim(ctx context.Context, compiler string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shim == "" && p.shimErr == nil {
		p.shim, p.shimErr = BuildShim(ctx, compiler, p.dir)
		if p.shimErr != nil {
			cc := p.CC
			if cc == "" {
				cc = "cc"
			}
			if cc, err := exec.LookPath(cc); err == nil {
				if so, err := BuildShim(ctx, cc, p.dir); err == nil {
					p.shim, p.shimErr = so, nil
				}
			}
		}
		if p.shimErr != nil {
			p.shimErr = fmt.Errorf("%w: %v", ErrUnavailable, p.shimErr)
		}
	}
	return p.shim, p.shimErr
}

// Changed says why the pool's servers no longer match what is on disk,
// "" when they do: a file a server runs code from (its compiler, the
// compiler's libraries) was replaced since it started, as an upgrade
// does. Its jobs would run the old compiler.
func (p *Pool) Changed() string {
	p.mu.Lock()
	running := append([]*Server(nil), p.running...)
	p.mu.Unlock()
	for _, s := range running {
		if f := s.proc.Replaced(); f != "" {
			return fmt.Sprintf("%s, which a fork server runs, was replaced on disk", f)
		}
	}
	return ""
}

// Close stops every server.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.servers {
		if e.srv != nil {
			e.srv.Close()
		}
	}
}
