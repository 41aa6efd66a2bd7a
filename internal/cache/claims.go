package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/procstart"
)

// Claims let the links that share a cache directory compile each action
// once when they need it at the same time (two links of one program, many
// executables of one library built at once): the first to miss an entry
// claims its key while it compiles, and the others wait for the claim to
// end, then find the result in the cache. A claim is a flock(2) on a file
// named by the key, so it ends with its process, however that ends: a
// killed link's waiters compile the action themselves.
//
// A claim is taken above every runner (a local process, a worker, remote
// execution), so a waiter holds no process slot, and what it finds is a
// cache entry, checked as every hit is.
type Claims struct {
	dir string
	// Wait bounds a wait for another process's claim: a holder that is
	// alive but makes no progress (a hung compile) does not hold the
	// waiters up for longer. A holder that is stopped (^Z, SIGSTOP) is not
	// waited for at all.
	Wait time.Duration
	// Poll is how often a waiter looks whether the holder is stopped.
	Poll time.Duration
}

// NewClaims returns the claims in dir (created if missing): a cache
// directory's "claims".
func NewClaims(dir string) (*Claims, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache claims %s: %w", dir, err)
	}
	return &Claims{dir: dir, Wait: 10 * time.Minute, Poll: time.Second}, nil
}

// Claim claims key, waiting while another process holds its claim;
// waited says it did (the caller looks the entry up again). release ends
// the claim. An error says the action is not claimed (ctx's error if it
// ended; otherwise why it is not worth waiting longer, or the claim file
// could not be used): the caller compiles it unclaimed.
func (c *Claims) Claim(ctx context.Context, key digest.Digest) (release func(), waited bool, err error) {
	path := filepath.Join(c.dir, key.HexHash())
	deadline := time.Now().Add(c.Wait)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, waited, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			waited = true
			if err := c.wait(ctx, f, path, deadline); err != nil {
				return nil, waited, err // f is wait's to close
			}
		} else if err != nil {
			f.Close()
			return nil, waited, err
		}
		if !linked(f, path) {
			// Its holder removed it as it ended: the claim is path's file now.
			f.Close()
			continue
		}
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
		// Removed before it is unlocked: a process that opened it
		// meanwhile finds it unlinked once it has the lock, and tries
		// path again.
		return func() { os.Remove(path); f.Close() }, waited, nil
	}
}

// wait takes f's lock, held by another process, once that one releases it.
// It gives up (an error) when ctx ends, the deadline passes or the holder
// is stopped; f is closed on every error, by the flock still waiting once
// it returns.
func (c *Claims) wait(ctx context.Context, f *os.File, path string, deadline time.Time) error {
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	giveUp := func(err error) error {
		go func() { <-got; f.Close() }()
		return err
	}
	limit := time.NewTimer(time.Until(deadline))
	defer limit.Stop()
	poll := time.NewTicker(c.Poll)
	defer poll.Stop()
	for {
		select {
		case err := <-got:
			if err != nil {
				f.Close()
			}
			return err
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-limit.C:
			return giveUp(fmt.Errorf("another link has compiled it for over %s (claim %s)", c.Wait, path))
		case <-poll.C:
			if pid := holder(path); pid > 0 {
				if st, err := procstart.ReadStat(pid); err == nil && (st.State() == "T" || st.State() == "t") {
					return giveUp(fmt.Errorf("the link compiling it (pid %d) is stopped", pid))
				}
			}
		}
	}
}

// holder is the process ID a claim file names, 0 if none.
func holder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// linked says whether f is still the file at path.
func linked(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}
