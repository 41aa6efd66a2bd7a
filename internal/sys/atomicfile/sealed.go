package atomicfile

import (
	"bytes"
	"crypto/sha256"

	"github.com/thindist/thindist/internal/sys/plainfile"
)

// WriteSealed writes data, which begins with its format's magic string,
// to path as WriteFile does, followed by its SHA-256: a sealed file, for
// memos that several processes load and save (ReadSealed).
func WriteSealed(path string, data []byte) error {
	sum := sha256.Sum256(data)
	return WriteFile(path, append(data, sum[:]...), 0o644)
}

// ReadSealed reads the sealed file at path (WriteSealed) and returns what
// follows magic, and false when the file is missing, unreadable, of
// another format or damaged: a memo then starts empty.
func ReadSealed(path, magic string) ([]byte, bool) {
	data, err := plainfile.ReadFile(path)
	if err != nil || len(data) < len(magic)+sha256.Size || !bytes.HasPrefix(data, []byte(magic)) {
		return nil, false
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sha256.Sum256(body) != [32]byte(sum) {
		return nil, false
	}
	return body[len(magic):], true
}
