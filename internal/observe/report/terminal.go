package report

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminalTurn is one process's turn at the progress line of a terminal
// that several links write to (make -j runs two links in one terminal):
// the process holding an flock(2) on the terminal's lock file draws its
// line, and the others draw none until it ends and one of them takes the
// turn. The lock goes with the process, so one killed leaves the turn to
// the next.
type terminalTurn struct {
	path string
	f    *os.File // the lock file, once opened
	own  bool
}

// newTerminalTurn returns the turn at the terminal (or file) f, its lock
// file in dir, or nil when f or dir cannot be used: then the line is drawn
// as if alone.
func newTerminalTurn(dir string, f *os.File) *terminalTurn {
	if f == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	// A terminal by its device number (/dev/pts/3 and /dev/tty name one
	// terminal through different inodes); anything else by its inode.
	name := fmt.Sprintf("progress-%x-%x.lock", st.Dev, st.Ino)
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		name = fmt.Sprintf("progress-tty-%x.lock", st.Rdev)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil
	}
	return &terminalTurn{path: filepath.Join(dir, name)}
}

// take reports whether this process has the turn, taking it if it is free.
func (t *terminalTurn) take() bool {
	if t.own {
		return true
	}
	if t.f == nil {
		f, err := os.OpenFile(t.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.own = true // no lock to take turns by: draw, as alone
			return true
		}
		t.f = f
	}
	t.own = syscall.Flock(int(t.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	return t.own
}

// release gives the turn up.
func (t *terminalTurn) release() {
	if t.f != nil {
		t.f.Close() // and the lock with it
		t.f, t.own = nil, false
	}
}
