// Package rundir holds thindist's per-user runtime directory: where it is
// (Path), making sure it is this user's alone (Private), and the markers
// in it that let one process of a make build speak for the build
// (FirstInBuild). The worker server, the shared terminal line and the
// once-per-build warnings live there.
package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/thindist/thindist/internal/sys/procstart"
)

// FirstInBuild reports whether this process is the first of its build to
// ask about kind (e.g. a warning's name), so that a warning every link of
// a `make -jN` would print is printed once. The build is the outermost
// make among this process's ancestors, named by its process ID and start
// time (a PID alone is reused); each (kind, build) leaves an empty marker
// file in dir, and markers of builds that ended are removed. Outside make,
// or when dir cannot be used safely, every process is the first.
func FirstInBuild(dir, kind string) bool {
	build, ok := outermostMake(os.Getpid())
	if !ok {
		return true
	}
	return firstIn(dir, kind, build)
}

// Path is the runtime directory, where FirstInBuild's markers go:
// $XDG_RUNTIME_DIR/thindist, else thindist-UID in the temporary directory.
func Path(getenv func(string) string) string {
	if d := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "thindist")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("thindist-%d", os.Getuid()))
}

// firstIn creates dir/kind-build, reporting whether this call created it.
func firstIn(dir, kind, build string) bool {
	if Private(dir) != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, kind+"-"+build), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false
	}
	if err != nil {
		return true
	}
	f.Close()
	removeEnded(dir)
	return true
}

// Private makes dir if needed (mode 0700) and returns an error unless
// it is a directory of this user's alone: not a symbolic link (another
// user could plant one in /tmp), owned by this user, no access for group
// or others. Its error says what is wrong and how to fix it.
func Private(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s is owned by another user; remove it, or name another directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o: others can reach it; make it yours alone (chmod 700 %s)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// removeEnded removes the markers of builds whose make is gone.
func removeEnded(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		parts := strings.Split(de.Name(), "-")
		if len(parts) < 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[len(parts)-2])
		if err != nil {
			continue
		}
		if _, start, _, ok := procStat(pid); !ok || strconv.FormatUint(start, 10) != parts[len(parts)-1] {
			os.Remove(filepath.Join(dir, de.Name()))
		}
	}
}

// outermostMake walks up from pid and returns "PID-STARTTIME" of the last
// make (or gmake) on the way to init: a recursive make's sub-makes share
// the outermost one's build.
func outermostMake(pid int) (string, bool) {
	build := ""
	for seen := 0; pid > 1 && seen < 64; seen++ {
		ppid, start, comm, ok := procStat(pid)
		if !ok {
			break
		}
		if comm == "make" || comm == "gmake" {
			build = fmt.Sprintf("%d-%d", pid, start)
		}
		pid = ppid
	}
	return build, build != ""
}

// procStat reads a process's parent, start time (in clock ticks since
// boot) and command name from /proc/PID/stat.
func procStat(pid int) (ppid int, start uint64, comm string, ok bool) {
	st, err := procstart.ReadStat(pid)
	if err != nil {
		return 0, 0, "", false
	}
	pp, err1 := st.Field(4)
	start, err2 := st.StartTicks()
	return int(pp), start, st.Comm, err1 == nil && err2 == nil
}
