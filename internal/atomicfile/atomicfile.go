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
	"io"
	"os"
	"path/filepath"
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
