package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Facts remembers what executables said of themselves (lld's
// --version), under dir and keyed by the executable's content
// (IDs), so that a build of many links asks each tool once, not
// once a link. Only ELF executables are remembered: what a script says
// depends on what it runs, which can change while the script does not.
type Facts struct {
	ids *IDs
	dir string
}

// NewFacts keeps answers under dir, identifying tools with ids.
func NewFacts(ids *IDs, dir string) *Facts {
	return &Facts{ids: ids, dir: dir}
}

// Get returns the answer remembered for the command name tool to
// question; ok is false when there is none.
func (f *Facts) Get(tool, question string) (answer string, ok bool) {
	path := f.path(tool, question)
	if path == "" {
		return "", false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	answer, ok = strings.CutPrefix(string(data), question+"\n")
	return answer, ok
}

// Put remembers answer; a failure only means asking again next time.
func (f *Facts) Put(tool, question, answer string) {
	path := f.path(tool, question)
	if path == "" || os.MkdirAll(f.dir, 0o755) != nil {
		return
	}
	atomicfile.WriteFile(path, []byte(question+"\n"+answer), 0o644)
}

// path is where the answer of tool to question is kept, "" if it is not
// to be kept (not an ELF executable, or unknown).
func (f *Facts) path(tool, question string) string {
	real, err := resolve(tool)
	if err != nil {
		return ""
	}
	var head [4]byte
	if n, err := plainfile.ReadHead(real, head[:]); err != nil || n < 4 || !bytes.Equal(head[:], []byte("\x7fELF")) {
		return ""
	}
	id, err := f.ids.ID(real)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(id + "\x00" + question))
	return filepath.Join(f.dir, hex.EncodeToString(sum[:16]))
}
