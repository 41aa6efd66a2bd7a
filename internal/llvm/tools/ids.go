// Package tools identifies the executables a run uses (compilers, lld) by
// their content, and remembers what they said of themselves. It stays
// small (no REAPI, no gRPC): the thindist-link front reads the same facts
// as thindist before deciding a link, and its start is what it saves.
package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// IDs identifies compilers by the SHA-256 digest of their executable.
// Hashing a statically linked clang takes a noticeable fraction of a
// second, so digests are remembered in memory for the run and on disk
// (under dir, keyed by path, trusted while size and modification time are
// unchanged) across runs.
type IDs struct {
	dir  string // "" keeps no record on disk
	mu   sync.Mutex
	seen map[string]string
}

// NewIDs remembers digests under dir (which may be "").
func NewIDs(dir string) *IDs {
	return &IDs{dir: dir, seen: map[string]string{}}
}

type compilerRecord struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime_ns"`
	Digest string `json:"digest"`
}

// ID returns "sha256:<hex>" of the executable the command name resolves to.
func (c *IDs) ID(name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.seen[name]; ok {
		return id, nil
	}
	real, err := resolve(name)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	rec := compilerRecord{Path: real, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	var recPath string
	if c.dir != "" {
		sum := sha256.Sum256([]byte(real))
		recPath = filepath.Join(c.dir, hex.EncodeToString(sum[:16]))
		var old compilerRecord
		if data, err := os.ReadFile(recPath); err == nil && json.Unmarshal(data, &old) == nil &&
			old.Path == rec.Path && old.Size == rec.Size && old.MTime == rec.MTime && old.Digest != "" {
			id := "sha256:" + old.Digest
			c.seen[name] = id
			return id, nil
		}
	}
	h := sha256.New()
	if _, _, err := plainfile.Copy(h, real, make([]byte, 64<<10)); err != nil {
		return "", err
	}
	rec.Digest = hex.EncodeToString(h.Sum(nil))
	if recPath != "" && os.MkdirAll(c.dir, 0o755) == nil {
		if data, err := json.Marshal(rec); err == nil {
			atomicfile.WriteFile(recPath, data, 0o644) // only a memo: failure costs a rehash
		}
	}
	id := "sha256:" + rec.Digest
	c.seen[name] = id
	return id, nil
}

// resolve returns the absolute path of the file the command name runs: a
// name without a slash looked up in PATH, symbolic links followed.
func resolve(name string) (string, error) {
	path := name
	if !strings.ContainsRune(name, '/') {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", err
		}
		path = p
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	return filepath.Abs(real)
}
