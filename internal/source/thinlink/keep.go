// --keep-native-objects: a copy of each native object under a predictable name.

package thinlink

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// keep copies every native object to its KeepName under the directory,
// each through the one atomic writer: a temporary file of a unique name
// beside it, then a rename, so links keeping into one directory at once
// never touch each other's files and a failure leaves no temporary file.
func (p *plan) keep(linked []*Module) error {
	dir := p.opts.KeepNativeObjects
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(p.opts.Dir, dir)
	}
	for _, m := range linked {
		dst := filepath.Join(dir, filepath.FromSlash(m.KeepName))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(p.abs(m.Native))
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("module %s: %w", m.Display, err)
		}
	}
	return nil
}
