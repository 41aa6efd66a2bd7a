package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/thindist/thindist/internal/sys/procstart"
)

// staging hands out temporary output paths in a private directory beside
// each final output, so the final rename is atomic (same file system) and a
// crash or cancellation leaves nothing under the final name. Compilers also
// put their own temporary files beside their -o, so those land in the
// staging directory too and go with it.
//
// A run that is killed (SIGKILL, a machine that loses power) cannot remove
// its staging directories, so each one is named for its run (see owner),
// and the first run to stage outputs in a directory removes those of runs
// that have ended.
type staging struct {
	me   *owner // nil if this process cannot name itself: no clean-up
	mu   sync.Mutex
	dirs map[string]string // final directory -> staging directory
	seq  int
}

func newStaging() *staging {
	s := &staging{dirs: map[string]string{}}
	if me, err := self(); err == nil {
		s.me = &me
	}
	return s
}

const (
	stagingPrefix = ".thindist-"
	stagingSuffix = ".tmp"
)

func (s *staging) path(final string) (string, error) {
	dir := filepath.Dir(final)
	s.mu.Lock()
	defer s.mu.Unlock()
	sd, ok := s.dirs[dir]
	if !ok {
		pattern := stagingPrefix + "*" + stagingSuffix
		if s.me != nil {
			removeStale(dir, *s.me)
			pattern = stagingPrefix + s.me.String() + "-*" + stagingSuffix
		}
		var err error
		sd, err = os.MkdirTemp(dir, pattern)
		if err != nil {
			return "", fmt.Errorf("creating a staging directory for outputs: %w", err)
		}
		s.dirs[dir] = sd
	}
	s.seq++
	return filepath.Join(sd, fmt.Sprintf("%d-%s", s.seq, filepath.Base(final))), nil
}

func (s *staging) removeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sd := range s.dirs {
		os.RemoveAll(sd)
	}
}

// removeStale removes the staging directories in dir of runs that have
// ended. Those it cannot judge (another machine's, another PID namespace's,
// an older thindist's unnamed ones) are left alone: removing a live run's
// directory would fail its link.
func removeStale(dir string, me owner) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, stagingPrefix) || !strings.HasSuffix(name, stagingSuffix) {
			continue
		}
		if o, ok := parseOwner(name); ok && me.outlived(o) {
			os.RemoveAll(filepath.Join(dir, name))
		}
	}
}

// owner names the process that made a staging directory, beyond doubt
// within one machine: a PID is reused, but not with the same start time,
// and a PID means something only in its namespace and boot.
type owner struct {
	host  string // a hash of the host name: machines may share a directory
	boot  string // the kernel's boot id, shortened
	ns    string // the PID namespace's inode
	pid   int
	start string // the process's start time, in clock ticks after boot
}

func (o owner) String() string {
	return strings.Join([]string{o.host, o.boot, o.ns, strconv.Itoa(o.pid), o.start}, ".")
}

// parseOwner reads the owner from a staging directory's name:
// ".thindist-<owner>-<random>.tmp".
func parseOwner(name string) (owner, bool) {
	s := strings.TrimSuffix(strings.TrimPrefix(name, stagingPrefix), stagingSuffix)
	s, _, ok := strings.Cut(s, "-")
	f := strings.Split(s, ".")
	if !ok || len(f) != 5 {
		return owner{}, false
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil || pid <= 0 {
		return owner{}, false
	}
	return owner{host: f[0], boot: f[1], ns: f[2], pid: pid, start: f[4]}, true
}

// self returns this process's owner name.
func self() (owner, error) {
	host, err := os.Hostname()
	if err != nil {
		return owner{}, err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return owner{}, err
	}
	ns, err := os.Readlink("/proc/self/ns/pid") // "pid:[4026531836]"
	if err != nil {
		return owner{}, err
	}
	ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return owner{}, err
	}
	h := sha256.Sum256([]byte(host))
	b := strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "")
	if len(b) < 8 || strings.ContainsAny(ns, ".-/") {
		return owner{}, fmt.Errorf("unexpected boot id %q or PID namespace %q", boot, ns)
	}
	return owner{host: hex.EncodeToString(h[:4]), boot: b[:8], ns: ns, pid: pid, start: start}, nil
}

// outlived reports whether o's process has ended, as seen from me.
func (me owner) outlived(o owner) bool {
	switch {
	case o.host != me.host:
		return false // another machine's, on a shared file system
	case o.boot != me.boot:
		return true // this machine has rebooted since
	case o.ns != me.ns:
		return false // another PID namespace's (a container's)
	}
	if err := syscall.Kill(o.pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	start, err := startTime(o.pid)
	return err == nil && start != o.start // the PID was reused
}

// startTime returns process pid's start time (procstart.Stat.StartTicks),
// as it is written in an owner name.
func startTime(pid int) (string, error) {
	st, err := procstart.ReadStat(pid)
	if err != nil {
		return "", err
	}
	t, err := st.StartTicks()
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(t, 10), nil
}
