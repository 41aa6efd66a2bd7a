// Package lockfile serialises read-modify-write updates of small files
// shared by concurrent thindist processes (a cache's counters, the run
// records' totals) with flock(2) on a lock file beside them.
package lockfile

import (
	"fmt"
	"os"
	"syscall"
)

// With runs f holding an exclusive lock on the file at path (created if
// missing). The lock goes with the process, so a crash never leaves it held.
func With(path string, f func() error) error {
	lf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return f()
}
