// Package atomicfile writes files so that a reader sees the old content or
// the new, never half of it: a temporary file in the same directory, then a
// rename.
//
// The rename also means that a path which is a hard link to another file
// (an output linked from the cache) is replaced, never written through: the
// other file keeps its content. Every writer of an action's output goes
// through here for that reason.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/thindist/thindist/internal/sys/plainfile"
)

// WriteFile writes data to path with permissions perm, atomically.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write writes what write writes to path with permissions perm,
// atomically. An error of write leaves path as it was.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	return WriteIn(filepath.Dir(path), path, perm, write)
}

// WriteIn is Write with the temporary file in tmpDir, which must be on the
// file system of path: a store that removes the temporary files of writers
// that died keeps them in one place.
func WriteIn(tmpDir, path string, perm os.FileMode, write func(io.Writer) error) error {
	f, err := os.CreateTemp(tmpDir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// WritePrivate writes data to path, a name that no one else reads until the
// caller is done with it (an executor's output, whose caller renames it into
// place only once the result is accepted): the caller's rename is the atomic
// step, so a temporary file and a rename of our own would only cost another
// file creation and a rename in the directory. Like Write it never writes
// through a file already at path (a hard link into a cache): it creates a
// new file, exclusively, after removing the old one. An error leaves nothing
// at path.
func WritePrivate(path string, data []byte, perm os.FileMode) error {
	err := plainfile.Create(path, data, perm)
	if errors.Is(err, fs.ErrExist) {
		if err = os.Remove(path); err == nil {
			err = plainfile.Create(path, data, perm)
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		os.Remove(path)
	}
	return err
}
