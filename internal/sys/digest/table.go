package digest

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"sort"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Table remembers file digests across runs, by path and stamp (device,
// inode, size, modification and status-change times), as Bazel's digest
// cache does: an input that has not changed since an earlier link hashed it
// costs a stat, not a read and a hash. An entry is only made from a stamp
// that was not racy (plainfile.Stamp.Racy) when the file was read, so an
// equal stamp later means the same content; any write changes the
// status-change time, which no process can set back.
//
// The table is a file (see Save) that several links may load and save at
// once: it is replaced whole by a rename, checksummed, and read as empty
// when missing or damaged. Whatever a link's save loses to another's costs
// only a hash the next time.
type Table struct {
	path string

	mu   sync.Mutex
	old  map[string]tableEntry // as loaded
	used map[string]tableEntry // found or made this run
}

type tableEntry struct {
	stamp plainfile.Stamp
	hash  [32]byte
	used  int64 // Unix seconds of the last run that used it
}

// TableMax bounds the entries a table keeps: those this run used, then the
// most recently used of the others.
const TableMax = 50000

// tableMagic begins a table file; a new format gets a new one, and a file
// of another reads as empty.
const tableMagic = "thindist digest table 1\n"

// LoadTable reads the table at path; a missing, damaged or unreadable
// file is an empty table, saved to path.
func LoadTable(path string) *Table {
	return &Table{path: path, old: readTable(path), used: map[string]tableEntry{}}
}

func readTable(path string) map[string]tableEntry {
	m := map[string]tableEntry{}
	b, ok := atomicfile.ReadSealed(path, tableMagic)
	if !ok {
		return m
	}
	for len(b) > 0 {
		var e tableEntry
		n, rest, ok := uvarint(b)
		if !ok || n > uint64(len(rest)) {
			return map[string]tableEntry{}
		}
		p := string(rest[:n])
		b = rest[n:]
		var v [6]uint64
		for i := range v {
			if v[i], b, ok = uvarint(b); !ok {
				return map[string]tableEntry{}
			}
		}
		if len(b) < 32 {
			return map[string]tableEntry{}
		}
		e.stamp = plainfile.Stamp{Dev: v[0], Ino: v[1], Size: int64(v[2]), Mtime: int64(v[3]), Ctime: int64(v[4])}
		e.used = int64(v[5])
		copy(e.hash[:], b[:32])
		b = b[32:]
		m[p] = e
	}
	return m
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// get returns the digest remembered for the file at path if its stamp is
// now s.
func (t *Table) get(path string, s plainfile.Stamp) (Digest, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.used[path]
	if !ok {
		e, ok = t.old[path]
	}
	if !ok || e.stamp != s {
		return Digest{}, false
	}
	e.used = time.Now().Unix()
	t.used[path] = e
	return Digest{Hash: e.hash, Size: s.Size}, true
}

// put remembers d as the digest of the file at path, read with the stamp
// s, which was not racy then.
func (t *Table) put(path string, s plainfile.Stamp, d Digest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.used[path] = tableEntry{stamp: s, hash: d.Hash, used: time.Now().Unix()}
}

// Save writes the table back: the entries of the file as it is now (other
// links may have saved theirs since this one loaded it), with this run's
// over them, at most TableMax.
func (t *Table) Save() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.used) == 0 {
		return nil
	}
	all := readTable(t.path)
	for p, e := range t.used {
		all[p] = e
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	if len(paths) > TableMax {
		sort.Slice(paths, func(i, j int) bool { return all[paths[i]].used > all[paths[j]].used })
		paths = paths[:TableMax]
	}
	sort.Strings(paths)
	b := append([]byte(nil), tableMagic...)
	for _, p := range paths {
		e := all[p]
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		for _, v := range []uint64{e.stamp.Dev, e.stamp.Ino, uint64(e.stamp.Size), uint64(e.stamp.Mtime), uint64(e.stamp.Ctime), uint64(e.used)} {
			b = binary.AppendUvarint(b, v)
		}
		b = append(b, e.hash[:]...)
	}
	err := atomicfile.WriteSealed(t.path, b)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no cache directory: nothing to remember in
	}
	return err
}
