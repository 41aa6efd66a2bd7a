package workerserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/sys/version"
)

// Identity names a thindist executable and the worker it runs, and the
// umask the workers write their objects with. A server serves the links of
// its own identity only: another one means thindist or the worker changed
// (an upgrade, a rebuild, another install), or the link's objects would be
// written with other permissions than its own clang's, and the server makes
// way for one of the new identity.
type Identity struct {
	Version  string `json:"version"`
	Thindist File   `json:"thindist"`
	Worker   File   `json:"worker"`
	Umask    string `json:"umask"`
}

// File is an executable, resolved, as it was when looked at.
type File struct {
	Path  string    `json:"path"`
	Size  int64     `json:"size"`
	Mtime time.Time `json:"mtime"`
}

// Own is the identity of this thindist, whose executable is exe, with the
// worker at worker.
func Own(exe, worker string) (Identity, error) {
	self, err := fileAt(exe)
	if err != nil {
		return Identity{}, err
	}
	w, err := fileAt(worker)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Version: version.Short(), Thindist: self, Worker: w, Umask: umask()}, nil
}

// umask is this process's, from /proc (setting it to read it would race
// with the process's other threads).
func umask() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func fileAt(path string) (File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return File{}, err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return File{}, err
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return File{}, err
	}
	return File{Path: resolved, Size: fi.Size(), Mtime: fi.ModTime()}, nil
}

// fields is id in a hello message.
func (id Identity) fields() []string {
	f := []string{id.Version, id.Umask}
	for _, x := range []File{id.Thindist, id.Worker} {
		f = append(f, x.Path, strconv.FormatInt(x.Size, 10), strconv.FormatInt(x.Mtime.UnixNano(), 10))
	}
	return f
}

// parseIdentity reads the fields of a hello message.
func parseIdentity(f []string) (Identity, error) {
	if len(f) != 8 {
		return Identity{}, fmt.Errorf("malformed identity of %d fields", len(f))
	}
	id := Identity{Version: f[0], Umask: f[1]}
	for i, x := range []*File{&id.Thindist, &id.Worker} {
		size, err1 := strconv.ParseInt(f[3+3*i], 10, 64)
		mtime, err2 := strconv.ParseInt(f[4+3*i], 10, 64)
		if err1 != nil || err2 != nil {
			return Identity{}, fmt.Errorf("malformed identity %q", f)
		}
		*x = File{Path: f[2+3*i], Size: size, Mtime: time.Unix(0, mtime)}
	}
	return id, nil
}

// differs says how other differs from id, "" when it does not.
func (id Identity) differs(other Identity) string {
	switch {
	case id.Version != other.Version:
		return fmt.Sprintf("thindist %s asked, this server is %s", other.Version, id.Version)
	case !id.Thindist.same(other.Thindist):
		return fmt.Sprintf("thindist %s asked, this server runs %s", other.Thindist, id.Thindist)
	case !id.Worker.same(other.Worker):
		return fmt.Sprintf("the worker %s asked, this server runs %s", other.Worker, id.Worker)
	case id.Umask != other.Umask:
		return fmt.Sprintf("a link of umask %s asked, this server's is %s", other.Umask, id.Umask)
	}
	return ""
}

func (f File) same(o File) bool {
	return f.Path == o.Path && f.Size == o.Size && f.Mtime.Equal(o.Mtime)
}

func (f File) String() string {
	return fmt.Sprintf("%s (%d bytes, modified %s)", f.Path, f.Size, f.Mtime.Format(time.RFC3339Nano))
}
