// The work directory: a private directory beside the output that holds the
// thin link's shards, the extracted archive members and the native objects.

package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const workMarker = ".thindist-work"

func (p *plan) makeWorkDir(work string) error {
	abs := p.abs(work)
	if strings.ContainsAny(abs, ";") {
		return fmt.Errorf("%s: the work directory's path must not contain ';' (lld's --thinlto-prefix-replace separator)", abs)
	}
	if _, err := os.Stat(abs); err == nil {
		// Left over from --keep-work-dir or a crash: only ever remove our own.
		if _, err := os.Stat(filepath.Join(abs, workMarker)); err != nil {
			return fmt.Errorf("%s exists and is not a thindist work directory; remove it or choose another with --work-dir", abs)
		}
		if err := os.RemoveAll(abs); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	p.work = p.portable(abs)
	return os.WriteFile(filepath.Join(abs, workMarker), nil, 0o644)
}
