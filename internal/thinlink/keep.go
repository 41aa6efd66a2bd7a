// --keep-native-objects: a copy of each native object under a predictable name.

package thinlink

import (
	"os"
	"path/filepath"
)

// keep copies every native object to its KeepName under the directory.
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
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	return nil
}
