package workerserver

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log"
	"path/filepath"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
)

// forkIdle is how long a fork Pool may go without a job before the start
// of another closes it, and maxForkPools how many are kept before idle
// ones are closed whatever their age.
const (
	forkIdle     = time.Minute
	maxForkPools = 8
)

// forks are the server's fork servers (internal/local/forkserver), kept warm
// across links as its workers are, for the jobs the workers do not take:
// a compiler that is not the workers' clang (another LLVM), options a
// worker is not tested with, a race's niced try. A fork server runs every
// job with the environment it started with, so each environment has a
// Pool of its own (the links of one build share one), and so has each
// compiler file the job's argv[0] resolves to in it: a compiler replaced
// on disk, or a name retargeted to another file, gets a new one. When a
// Pool starts, the idle ones that went forkIdle without a job are closed,
// and the least recently used idle ones while maxForkPools are kept; a
// busy one never is.
type forks struct {
	// ctx is the server's: a fork server starts under it, not under the
	// job that asked first, whose link may leave meanwhile while the
	// next links' jobs wait for that start (a Pool remembers a failed one).
	ctx context.Context
	dir string // where the shim is built: the server's directory
	log *log.Logger

	mu     sync.Mutex
	pools  map[string]*forkPool
	jobs   int // forked
	closed bool
}

type forkPool struct {
	key  string
	p    *forkserver.Pool
	busy int
	used time.Time
	// dead: its fork server failed after it started (killed, say); the
	// next job starts a new Pool, this one is closed once idle.
	dead bool
}

func newForks(ctx context.Context, dir string, logger *log.Logger) *forks {
	return &forks{ctx: ctx, dir: filepath.Join(dir, "forkserver"), log: logger, pools: map[string]*forkPool{}}
}

// run forks c (its argv in its directory with its environment, niced by
// c.Nice) and returns how it ended and what it printed. An error wrapping
// forkserver.ErrUnavailable means the job did not run to its end here: the
// link runs it another way.
func (f *forks) run(ctx context.Context, c *proc.Cmd) (forkserver.Status, []byte, []byte, error) {
	file, id, err := worker.Identify(c.Argv[0], c.Dir, c.Env)
	if err != nil {
		return forkserver.Status{}, nil, nil, fmt.Errorf("%w: %v", forkserver.ErrUnavailable, err)
	}
	h := sha256.New()
	for _, kv := range c.Env {
		h.Write([]byte(kv + "\x00"))
	}
	fp := f.take(fmt.Sprintf("%x %s %s", h.Sum(nil), id, file), c.Env)
	if fp == nil {
		return forkserver.Status{}, nil, nil, fmt.Errorf("%w: the server is exiting", forkserver.ErrUnavailable)
	}
	defer f.give(fp)
	srv, err := fp.p.Server(f.ctx, file)
	if err != nil {
		return forkserver.Status{}, nil, nil, err
	}
	var stdout, stderr proc.Capture
	st, err := srv.Run(ctx, forkserver.Job{Argv: c.Argv, Dir: c.Dir, Stdout: &stdout, Stderr: &stderr, Nice: c.Nice}, proc.DefaultGrace)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.jobs++
	case srv.Gone() && ctx.Err() == nil:
		// A Pool keeps a server that died: it would refuse every job
		// of this compiler for the server's life.
		f.log.Printf("fork server of %s: %v; starting another for the next job", file, err)
		fp.dead = true
		if f.pools[fp.key] == fp {
			delete(f.pools, fp.key)
		}
	}
	return st, stdout.Bytes(), stderr.Bytes(), err
}

// take returns the Pool of key, started with env if there is none (nil
// once the server is exiting), marked busy; give it back with give.
func (f *forks) take(key string, env []string) *forkPool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	fp := f.pools[key]
	if fp == nil {
		f.evictLocked()
		fp = &forkPool{key: key, p: forkserver.NewPool(f.dir, env, func(format string, args ...any) {
			f.log.Printf("fork server: "+format, args...)
		})}
		f.pools[key] = fp
	}
	fp.busy++
	fp.used = time.Now()
	return fp
}

func (f *forks) give(fp *forkPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp.busy--
	fp.used = time.Now()
	if fp.dead && fp.busy == 0 {
		go fp.p.Close()
	}
}

// evictLocked closes the idle Pools unused for forkIdle, then the least
// recently used idle ones while maxForkPools or more are kept.
func (f *forks) evictLocked() {
	for {
		var oldest string
		for k, fp := range f.pools {
			if fp.busy == 0 && (oldest == "" || fp.used.Before(f.pools[oldest].used)) {
				oldest = k
			}
		}
		if oldest == "" || (len(f.pools) < maxForkPools && time.Since(f.pools[oldest].used) < forkIdle) {
			return
		}
		go f.pools[oldest].p.Close()
		delete(f.pools, oldest)
	}
}

// changed says why a fork server no longer runs the compiler on disk
// (forkserver.Pool.Changed), "" if none.
func (f *forks) changed() string {
	f.mu.Lock()
	pools := make([]*forkPool, 0, len(f.pools))
	for _, fp := range f.pools {
		pools = append(pools, fp)
	}
	f.mu.Unlock()
	for _, fp := range pools {
		if why := fp.p.Changed(); why != "" {
			return why
		}
	}
	return ""
}

// stats returns the fork servers running and the jobs forked.
func (f *forks) stats() (servers, jobs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fp := range f.pools {
		servers += fp.p.Stats().Servers
	}
	return servers, f.jobs
}

// close stops every fork server; no job is taken after it.
func (f *forks) close() {
	f.mu.Lock()
	pools := f.pools
	f.pools, f.closed = nil, true
	f.mu.Unlock()
	for _, fp := range pools {
		fp.p.Close()
	}
}
