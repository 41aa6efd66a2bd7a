// Package atomicfile writes files so that a reader sees the old content or
// the new, never half of it: a temporary file in the same directory, then a
// rename.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path with permissions perm, atomically.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
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
