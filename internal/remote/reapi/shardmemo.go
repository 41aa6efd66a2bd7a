package reapi

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"sync"

	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// ShardMemo remembers across runs what a key takes from an index shard,
// its module table and normalised digest (bitcode.TableAndDigest), by the
// SHA-256 of the shard's bytes: a relink whose thin link wrote the same
// shards again (the same objects, no archive members under PID-bearing
// names) hashes each shard instead of decoding it. The entries are those
// of one thindist executable, named by the identity given to
// LoadShardMemo: another build may normalise shards otherwise, and
// finds the memo empty.
//
// The memo is a file that several links may load and save at once: it is
// replaced whole by a rename, checksummed, and read as empty when
// missing, damaged or another executable's. What a save loses to
// another's costs only a decode the next time. Loading it indexes its
// entries and decodes none: an entry is decoded when its shard comes up,
// so that a small link in a cache shared with large ones pays little for
// theirs.
type ShardMemo struct {
	path, identity string

	mu    sync.Mutex
	old   map[[32]byte][]byte     // as loaded: each entry's encoding
	added map[[32]byte]shardEntry // decoded this run
}

type shardEntry struct {
	table []bitcode.Module
	norm  [32]byte
}

// ShardMemoMax and ShardMemoBytes bound the entries a memo keeps, and
// their size: this run's first, then others'.
const (
	ShardMemoMax   = 5000
	ShardMemoBytes = 16 << 20
)

// shardMemoMagic begins a memo file; a new format gets a new one.
const shardMemoMagic = "thindist shard memo 1\n"

// LoadShardMemo reads the memo at path for the executable identity (its
// path and stamp, say); a missing, damaged or other file is an empty
// memo, saved to path. An empty identity makes a memo that remembers
// nothing.
func LoadShardMemo(path, identity string) *ShardMemo {
	m := &ShardMemo{path: path, identity: identity, added: map[[32]byte]shardEntry{}}
	if identity != "" {
		m.old = readShardMemo(path, identity)
	}
	return m
}

// tableAndDigest is bitcode.TableAndDigest(shard), from the memo when it
// has the shard. The table returned is shared: read it, never change it.
func (m *ShardMemo) tableAndDigest(shard []byte) ([]bitcode.Module, [32]byte, error) {
	if m == nil || m.identity == "" {
		return bitcode.TableAndDigest(shard)
	}
	h := sha256.Sum256(shard)
	m.mu.Lock()
	e, ok := m.added[h]
	enc, loaded := m.old[h]
	m.mu.Unlock()
	if ok {
		return e.table, e.norm, nil
	}
	if loaded {
		if e, ok := decodeShardEntry(enc); ok {
			return e.table, e.norm, nil
		}
	}
	table, norm, err := bitcode.TableAndDigest(shard)
	if err != nil {
		return nil, norm, err
	}
	m.mu.Lock()
	m.added[h] = shardEntry{table: table, norm: norm}
	m.mu.Unlock()
	return table, norm, nil
}

// Save writes the memo back when this run decoded shards it did not have:
// the entries of the file as it is now (other links may have saved theirs
// since), with this run's, within ShardMemoMax and ShardMemoBytes.
func (m *ShardMemo) Save() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.added) == 0 {
		return nil
	}
	b := append([]byte(nil), shardMemoMagic...)
	b = appendString(b, m.identity)
	n := 0
	add := func(h [32]byte, enc []byte) {
		if n >= ShardMemoMax || len(b)+len(enc) > ShardMemoBytes {
			return
		}
		b = append(b, h[:]...)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
		n++
	}
	for h, e := range m.added {
		add(h, encodeShardEntry(e))
	}
	for h, enc := range readShardMemo(m.path, m.identity) {
		if _, ok := m.added[h]; !ok {
			add(h, enc)
		}
	}
	err := atomicfile.WriteSealed(m.path, b)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no cache directory: nothing to remember in
	}
	return err
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// encodeShardEntry is an entry's encoding: the normalised digest, then
// the table's length and modules.
func encodeShardEntry(e shardEntry) []byte {
	b := append([]byte(nil), e.norm[:]...)
	b = binary.AppendUvarint(b, uint64(len(e.table)))
	for _, mod := range e.table {
		b = binary.AppendUvarint(b, mod.ID)
		b = appendString(b, mod.Path)
		for _, w := range mod.Hash {
			b = binary.AppendUvarint(b, uint64(w))
		}
	}
	return b
}

func decodeShardEntry(enc []byte) (shardEntry, bool) {
	var e shardEntry
	r := memoReader{b: enc, ok: true}
	copy(e.norm[:], r.bytes(32))
	n := r.uint()
	if !r.ok || n > uint64(len(r.b)) {
		return e, false
	}
	e.table = make([]bitcode.Module, n)
	for i := range e.table {
		e.table[i].ID = r.uint()
		e.table[i].Path = r.string()
		for j := range e.table[i].Hash {
			w := r.uint()
			if w > 0xffffffff {
				r.ok = false
			}
			e.table[i].Hash[j] = uint32(w)
		}
	}
	return e, r.ok && len(r.b) == 0
}

// readShardMemo indexes the memo file at path, if it is identity's: each
// entry's encoding by its shard's hash.
func readShardMemo(path, identity string) map[[32]byte][]byte {
	m := map[[32]byte][]byte{}
	body, ok := atomicfile.ReadSealed(path, shardMemoMagic)
	if !ok {
		return m
	}
	r := memoReader{b: body, ok: true}
	if r.string() != identity || !r.ok {
		return m
	}
	for len(r.b) > 0 && r.ok {
		var h [32]byte
		copy(h[:], r.bytes(32))
		n := r.uint()
		if n > uint64(len(r.b)) {
			r.ok = false
		}
		enc := r.bytes(int(n))
		if r.ok {
			m[h] = enc
		}
	}
	if !r.ok {
		return map[[32]byte][]byte{}
	}
	return m
}

// memoReader decodes a memo file's body; ok turns false at the first
// malformed or truncated field, and every later read returns zero.
type memoReader struct {
	b  []byte
	ok bool
}

func (r *memoReader) uint() uint64 {
	if !r.ok {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *memoReader) bytes(n int) []byte {
	if !r.ok || len(r.b) < n {
		r.ok = false
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *memoReader) string() string {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.ok = false
	}
	return string(r.bytes(int(n)))
}
