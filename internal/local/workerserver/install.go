package workerserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"

	"github.com/thindist/thindist/internal/sys/rundir"
)

// InstallDir is the directory, in base (the user's server directory), of
// the server for the links of id's installation: its resolved thindist
// executable and worker paths. Each installation of thindist (a project's
// pinned copy, a developer's own build) has a server of its own, and a
// link never replaces another installation's; a rebuild at the same paths
// is the same installation, whose stale server a link replaces (Serve).
func InstallDir(base string, id Identity) string {
	h := sha256.Sum256([]byte(id.Thindist.Path + "\x00" + id.Worker.Path))
	return filepath.Join(base, "server-"+hex.EncodeToString(h[:6]))
}

// installDir is InstallDir, made if missing, checked to be the user's alone.
func installDir(base string, id Identity) (string, error) {
	if err := rundir.Private(base); err != nil {
		return "", err
	}
	dir := InstallDir(base, id)
	return dir, rundir.Private(dir)
}

// List is the status of every server of the user's in base, one per
// installation, and of one an older thindist runs in base itself. A
// server that does not answer is left out; one that answers wrongly is an
// error, after the others.
func List(base string) ([]*Status, error) {
	dirs, _ := filepath.Glob(filepath.Join(base, "server-*"))
	if _, err := os.Lstat(Socket(base)); err == nil {
		dirs = append(dirs, base)
	}
	var sts []*Status
	var errs []error
	for _, dir := range dirs {
		st, err := QueryStatus(dir)
		switch {
		case errors.Is(err, ErrNoServer):
		case err != nil:
			errs = append(errs, err)
		default:
			st.Dir = dir
			sts = append(sts, st)
		}
	}
	return sts, errors.Join(errs...)
}

// Resolved is path made absolute, its symbolic links resolved: an
// executable as a server's Identity names it.
func Resolved(path string) (string, error) {
	f, err := fileAt(path)
	return f.Path, err
}
