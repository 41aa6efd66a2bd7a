// Package digest names content the way the Remote Execution API does: a
// SHA-256 hash and a size. Files hashes each file once per run however many
// actions read it.
package digest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Digest identifies a blob by content.
type Digest struct {
	Hash [32]byte
	Size int64
}

// Empty is the digest of no bytes.
var Empty = OfBytes(nil)

// OfBytes digests b.
func OfBytes(b []byte) Digest { return Digest{Hash: sha256.Sum256(b), Size: int64(len(b))} }

// OfMessage digests the deterministic encoding of m and returns it too.
func OfMessage(m proto.Message) (Digest, []byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return Digest{}, nil, err
	}
	return OfBytes(b), b, nil
}

// OfFile digests the file at path.
func OfFile(path string) (Digest, error) {
	d, _, err := ofFile(path)
	return d, err
}

// OfFileHead is OfFile that also copies the file's first len(head) bytes
// into head as it reads them, returning how many (fewer only for a shorter
// file), and the file's stamp, taken before it was read: a caller that
// checks what a file begins with as well as its digest reads it once.
func OfFileHead(path string, head []byte) (d Digest, n int, stamp plainfile.Stamp, err error) {
	w := &headWriter{head: head}
	d, stamp, err = ofFileTo(path, w)
	return d, w.n, stamp, err
}

// headWriter keeps the first len(head) bytes written to it.
type headWriter struct {
	head []byte
	n    int
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.n += copy(w.head[w.n:], p)
	return len(p), nil
}

// ofFile is OfFile, with the file's stamp taken before it was read.
func ofFile(path string) (Digest, plainfile.Stamp, error) { return ofFileTo(path, nil) }

// ofFileTo is ofFile that also writes what it reads to also, if not nil.
func ofFileTo(path string, also io.Writer) (Digest, plainfile.Stamp, error) {
	h := sha256.New()
	var w io.Writer = h
	if also != nil {
		w = io.MultiWriter(h, also)
	}
	b := bufs.Get().(*[]byte)
	defer bufs.Put(b)
	n, stamp, err := plainfile.Copy(w, path, *b)
	if err != nil {
		return Digest{}, stamp, err
	}
	var d Digest
	copy(d.Hash[:], h.Sum(nil))
	d.Size = n
	return d, stamp, nil
}

// bufs holds copy buffers: io.Copy from an *os.File into a hash allocates
// 32 KiB per call, which on a warm relink (three files hashed per job)
// would be most of thindist's allocation and of its GC work.
var bufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Copy is io.Copy through a pooled buffer, for writers such as hashes that
// cannot read from a file themselves.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	b := bufs.Get().(*[]byte)
	defer bufs.Put(b)
	// Hide src's WriterTo (os.File has one that ignores the buffer).
	return io.CopyBuffer(dst, struct{ io.Reader }{src}, *b)
}

// HexHash is the hash in lower-case hex.
func (d Digest) HexHash() string { return hex.EncodeToString(d.Hash[:]) }

// String renders "hash/size", the form REAPI resource names use.
func (d Digest) String() string { return d.HexHash() + "/" + strconv.FormatInt(d.Size, 10) }

// Proto converts to the REAPI message.
func (d Digest) Proto() *repb.Digest { return &repb.Digest{Hash: d.HexHash(), SizeBytes: d.Size} }

// FromProto converts from the REAPI message, checking its form.
func FromProto(p *repb.Digest) (Digest, error) {
	if p == nil {
		return Digest{}, fmt.Errorf("missing digest")
	}
	return Parse(p.GetHash(), p.GetSizeBytes())
}

// Parse builds a digest from a hex hash and a size.
func Parse(hash string, size int64) (Digest, error) {
	var d Digest
	if len(hash) != 64 || strings.ToLower(hash) != hash {
		return d, fmt.Errorf("malformed SHA-256 hash %q", hash)
	}
	if _, err := hex.Decode(d.Hash[:], []byte(hash)); err != nil {
		return d, fmt.Errorf("malformed SHA-256 hash %q", hash)
	}
	if size < 0 {
		return d, fmt.Errorf("negative size %d", size)
	}
	d.Size = size
	return d, nil
}

// Files memoises file digests for one run, so an import shared by a
// thousand actions is read once. Safe for concurrent use; concurrent calls
// for the same path wait for one read.
type Files struct {
	mu sync.Mutex
	m  map[string]*fileEntry
	// table, if set, remembers digests across runs.
	table *Table
	// now is the clock stamps are judged racy by (time.Now; tests move it).
	now func() time.Time
}

type fileEntry struct {
	once sync.Once
	d    Digest
	err  error
	// stamp is the file's, taken before it was read for d; trusted
	// unless racy (plainfile.Stamp.Racy) as of when it was taken.
	stamp   plainfile.Stamp
	trusted bool
	ready   atomic.Bool // set once the fields above are
}

// NewFiles returns an empty memo.
func NewFiles() *Files { return &Files{m: map[string]*fileEntry{}, now: time.Now} }

// NewFilesWith returns an empty memo that takes the digests of files
// unchanged since an earlier run from t, and puts those it makes in it.
func NewFilesWith(t *Table) *Files {
	return &Files{m: map[string]*fileEntry{}, table: t, now: time.Now}
}

// Get digests the file at the absolute path.
func (f *Files) Get(path string) (Digest, error) {
	d, _, err := f.GetHashing(path)
	return d, err
}

// GetHashing is Get that also reports whether this call read the file to
// hash it (false when the digest came from this run's memo or the table).
func (f *Files) GetHashing(path string) (d Digest, hashed bool, err error) {
	f.mu.Lock()
	e, ok := f.m[path]
	if !ok {
		e = &fileEntry{}
		f.m[path] = e
	}
	f.mu.Unlock()
	e.once.Do(func() {
		defer e.ready.Store(true)
		if f.table != nil {
			if s, err := plainfile.StampOf(path); err == nil {
				if d, ok := f.table.get(path, s); ok {
					// Unchanged since a run read it with a stamp that
					// was not racy: as trusted as if read now.
					e.d, e.stamp, e.trusted = d, s, true
					return
				}
			}
		}
		at := f.now()
		hashed = true
		e.d, e.stamp, e.err = ofFile(path)
		e.trusted = e.err == nil && !e.stamp.Racy(at)
		if e.trusted && e.d.Size == e.stamp.Size && f.table != nil {
			f.table.put(path, e.stamp, e.d)
		}
	})
	return e.d, hashed, e.err
}

// Unchanged reports whether the file at path, now stamped now (taken after
// reading it again), still holds what Get found in it, d, without hashing
// it again: Get has digested it to d, the stamp it took before reading it
// is equal to now, and was not racy. False means "not known", and the
// caller hashes. An uploader reads each input again to send it, and
// this spares hashing it twice (see docs/design.md, "Inputs hashed once").
func (f *Files) Unchanged(path string, d Digest, now plainfile.Stamp) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	e, ok := f.m[path]
	f.mu.Unlock()
	if !ok {
		return false
	}
	if !e.ready.Load() {
		return false // still being digested
	}
	return e.err == nil && e.trusted && e.d == d && e.stamp == now
}

// Save saves the digests this run found or made to the table the memo was
// made with (NewFilesWith), if any.
func (f *Files) Save() error {
	if f == nil || f.table == nil {
		return nil
	}
	return f.table.Save()
}

// Prefetch digests the files at paths (absolute) in the background, in
// order, with up to workers at a time, and returns at once; a Get for one
// of them waits for its digest or computes it first. It stops early when
// ctx ends.
func (f *Files) Prefetch(ctx context.Context, paths []string, workers int) {
	var next atomic.Int64
	for range max(workers, 1) {
		go func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(paths) {
					return
				}
				f.Get(paths[i]) // an error is the Get's again, for its caller
			}
		}()
	}
}
