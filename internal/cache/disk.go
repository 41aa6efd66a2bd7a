package cache

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/lockfile"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Disk is a Store in a directory on this machine:
//
//	cas/<hh>/<hash>   blobs, named by their SHA-256
//	ac/<hh>/<hash>    ActionResult records, named by the action key
//	stats.json        counters over the cache's life
//	lock              flock(2)ed while stats are updated or entries evicted
//	claims/<hash>     the actions being compiled, by key (Claims)
//
// Every file is written under a temporary name and renamed into place, so
// links sharing the directory see whole entries or none. Every read checks
// the digest; a corrupt or truncated entry is deleted and reads as a miss.
// Use (a hit, a write) sets an entry's modification time, which orders
// least-recently-used eviction: to within touchInterval, as a use less
// than that after the last one leaves the time as it is.
//
// Blobs are read-only files (0444), made by hard-linking the file stored
// where the file system allows (a compiler's output: storing a result
// creates one new file, its record) and placed the same way by a hit (no
// copy, no new file), else cloned (FICLONE) or copied. A placed object is
// then the blob itself, read-only: a linker or user that opens it for
// writing is refused, and no writer of thindist's ever writes into an
// existing file (each writes a new one and renames it). Whatever gets
// through (root ignores the mode) changes the blob's content, which the
// next read's digest check finds: the blob is removed and never placed.
type Disk struct {
	dir     string
	written atomic.Int64 // bytes this process added, to decide when to trim
}

// OpenDisk opens (creating) the cache directory.
func OpenDisk(dir string) (*Disk, error) {
	for _, sub := range []string{"cas", "ac", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("cache directory %s: %w", dir, err)
		}
	}
	// Existing directories say nothing about whether entries can be
	// written (a read-only mount, another user's cache): try.
	probe, err := os.CreateTemp(filepath.Join(dir, "tmp"), "probe-*")
	if err != nil {
		return nil, fmt.Errorf("cache directory %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &Disk{dir: dir}, nil
}

// ReadDisk opens the cache directory dir for reading its statistics and
// entries only: unlike OpenDisk it creates nothing and needs no write
// access (a read-only mount, another user's cache); a directory that does
// not exist reads as an empty cache.
func ReadDisk(dir string) *Disk { return &Disk{dir: dir} }

// Dir is the cache directory.
func (c *Disk) Dir() string { return c.dir }

func (c *Disk) casPath(d digest.Digest) string {
	h := d.HexHash()
	return filepath.Join(c.dir, "cas", h[:2], h)
}

func (c *Disk) acPath(key digest.Digest) string {
	h := key.HexHash()
	return filepath.Join(c.dir, "ac", h[:2], h)
}

// GetActionResult reads the record for key.
func (c *Disk) GetActionResult(_ context.Context, _ Meter, key digest.Digest, _ []string) (*repb.ActionResult, error) {
	p := c.acPath(key)
	data, stamp, err := plainfile.ReadFileStamped(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	// A record is a SHA-256 of the message followed by the message, so a
	// truncated or flipped record (or object in it) is detected, not
	// misparsed. Records are renamed into place whole: a damaged one is
	// corruption, not a write in progress.
	if len(data) < sha256.Size || sha256.Sum256(data[sha256.Size:]) != [32]byte(data[:sha256.Size]) {
		os.Remove(p)
		return nil, fmt.Errorf("cached record %s is corrupt (its checksum does not match); removed it", p)
	}
	res := &repb.ActionResult{}
	if err := proto.Unmarshal(data[sha256.Size:], res); err != nil {
		os.Remove(p)
		return nil, fmt.Errorf("cached record %s is corrupt (%v); removed it", p, err)
	}
	used(p, stamp)
	return res, nil
}

// UpdateActionResult writes the record for key.
func (c *Disk) UpdateActionResult(_ context.Context, key digest.Digest, res *repb.ActionResult) error {
	msg, err := proto.MarshalOptions{Deterministic: true}.Marshal(res)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(msg)
	// Records count towards the size limit like blobs: with small objects
	// they are a real share of the cache.
	c.written.Add(int64(len(sum) + len(msg)))
	return c.writeAtomic(c.acPath(key), func(w io.Writer) error {
		if _, err := w.Write(sum[:]); err != nil {
			return err
		}
		_, err := w.Write(msg)
		return err
	})
}

// ReadBlob places blob d at dst (a hard link, else a clone or a copy) and
// verifies it.
func (c *Disk) ReadBlob(_ context.Context, _ Meter, d digest.Digest, dst string) error {
	_, err := c.readBlob(d, dst, nil)
	return err
}

// ReadBlobHead is ReadBlob that also copies the blob's first len(head)
// bytes into head and returns how many (HeadReader), from the read that
// verifies it.
func (c *Disk) ReadBlobHead(_ context.Context, _ Meter, d digest.Digest, dst string, head []byte) (int, error) {
	return c.readBlob(d, dst, head)
}

func (c *Disk) readBlob(d digest.Digest, dst string, head []byte) (int, error) {
	src := c.casPath(d)
	var got digest.Digest
	var n int
	err := os.Link(src, dst)
	if errors.Is(err, fs.ErrExist) {
		// Left by an earlier attempt (dst is the caller's own path):
		// replaced, not written through. Removing it first always
		// would cost every hit a failed unlink.
		os.Remove(dst)
		err = os.Link(src, dst)
	}
	// The stamp of the blob, when dst is the blob itself (a hard link).
	var stamp *plainfile.Stamp
	if err == nil {
		var s plainfile.Stamp
		got, n, s, err = digest.OfFileHead(dst, head)
		stamp = &s
	} else if !errors.Is(err, fs.ErrNotExist) {
		// Another file system, or one without hard links.
		os.Remove(dst)
		var in *os.File
		if in, err = os.Open(src); err == nil {
			got, err = cloneOrCopy(in, dst)
			in.Close()
		}
		if err == nil && len(head) > 0 {
			n, err = plainfile.ReadHead(dst, head)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrNotFound
	}
	if err != nil {
		os.Remove(dst)
		return 0, err
	}
	if got != d {
		os.Remove(dst)
		os.Remove(src)
		return 0, fmt.Errorf("cached blob %s is corrupt (content digest %s); removed it", d, got)
	}
	if stamp != nil {
		used(src, *stamp)
	} else {
		touch(src)
	}
	return n, nil
}

// cloneOrCopy writes the content of in to the new file dst, sharing its
// blocks where the file system can (FICLONE) and copying it otherwise, and
// returns the digest of what dst holds.
func cloneOrCopy(in *os.File, dst string) (digest.Digest, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return digest.Digest{}, err
	}
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		if err := out.Close(); err != nil {
			return digest.Digest{}, err
		}
		return digest.OfFile(dst)
	}
	h := sha256.New()
	n, err := digest.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return digest.Digest{}, err
	}
	d := digest.Digest{Size: n}
	copy(d.Hash[:], h.Sum(nil))
	return d, nil
}

// ReadBlobBytes reads a small blob and verifies it.
func (c *Disk) ReadBlobBytes(_ context.Context, _ Meter, d digest.Digest) ([]byte, error) {
	if d.Size == 0 {
		return nil, nil
	}
	p := c.casPath(d)
	data, stamp, err := plainfile.ReadFileStamped(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if digest.OfBytes(data) != d {
		os.Remove(p)
		return nil, fmt.Errorf("cached blob %s is corrupt; removed it", d)
	}
	used(p, stamp)
	return data, nil
}

// WriteBlob stores the content of src, checking that it is d: as a hard
// link to src, made read-only, where the file system allows (no new file),
// else as a copy. src then is a name of the blob: like every file thindist
// writes, it must be replaced, never written in place.
func (c *Disk) WriteBlob(_ context.Context, _ Meter, d digest.Digest, src string) error {
	dst := c.casPath(d)
	if touch(dst) {
		return nil // already stored: content-addressed, so identical
	}
	got, err := digest.OfFile(src)
	if err != nil {
		return err
	}
	if got != d {
		return fmt.Errorf("%s changed while it was being cached", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// Read-only before it is in the store: its every name is read-only.
	if fi, err := os.Stat(src); err == nil && os.Chmod(src, blobMode) == nil {
		err = os.Link(src, dst)
		if err == nil || errors.Is(err, fs.ErrExist) {
			c.written.Add(d.Size)
			return nil
		}
		os.Chmod(src, fi.Mode().Perm()) // not linked: src is no blob
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return atomicfile.WriteIn(filepath.Join(c.dir, "tmp"), dst, blobMode, func(w io.Writer) error {
		h := sha256.New()
		n, err := digest.Copy(io.MultiWriter(w, h), f)
		if err != nil {
			return err
		}
		if n != d.Size || [32]byte(h.Sum(nil)) != d.Hash {
			return fmt.Errorf("%s changed while it was being cached", src)
		}
		c.written.Add(n)
		return nil
	})
}

// blobMode is a blob's: read-only, as every name it is placed under.
const blobMode = 0o444

// WriteBlobBytes stores data.
func (c *Disk) WriteBlobBytes(_ context.Context, _ Meter, d digest.Digest, data []byte) error {
	if d.Size == 0 {
		return nil
	}
	dst := c.casPath(d)
	if touch(dst) {
		return nil
	}
	c.written.Add(int64(len(data)))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteIn(filepath.Join(c.dir, "tmp"), dst, blobMode, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// writeAtomic writes a file under tmp/ and renames it to dst: the
// temporary files of writers that died are all in tmp/, where Trim removes
// them.
func (c *Disk) writeAtomic(dst string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteIn(filepath.Join(c.dir, "tmp"), dst, 0o644, write)
}

// touch marks p as used now; it reports whether p exists.
func touch(p string) bool {
	now := time.Now()
	return os.Chtimes(p, now, now) == nil
}

// used marks the entry p, just read with the stamp s, as used now, unless
// its modification time is already less than touchInterval old: eviction
// (Trim) orders entries by that time, and a relink soon after the last
// one would otherwise set it again for every entry it reads, a system
// call per file for a precision eviction does not need.
func used(p string, s plainfile.Stamp) {
	if age := time.Now().UnixNano() - s.Mtime; age >= 0 && age < int64(touchInterval) {
		return
	}
	touch(p)
}

// touchInterval is how stale an entry's use time may be: entries used
// within it of each other may be evicted in either order (as Go's build
// cache does).
const touchInterval = time.Hour

// Stats are a cache's counters over its life.
type Stats struct {
	Hits int64 `json:"hits"`
	// ApproxBytes is the size at the last trim plus what was written since:
	// a full scan only runs when it passes the limit.
	ApproxBytes int64 `json:"approx_bytes"`
	Misses      int64 `json:"misses"`
	// Evictions counts the entries (action records) evicted, in the unit
	// of Entries; EvictedBytes everything evicted, blobs included.
	Evictions    int64         `json:"evictions"`
	EvictedBytes int64         `json:"evicted_bytes"`
	SavedCPU     time.Duration `json:"saved_cpu_ns"`
	// Limit is the size limit the last run that trimmed or finished
	// applied: the one links use, whatever the reader's own settings.
	Limit int64 `json:"limit,omitempty"`
	// Entries and Bytes are measured when asked, not stored.
	Entries int64 `json:"-"`
	Bytes   int64 `json:"-"`
}

// withLock runs f holding the cache's lock file.
func (c *Disk) withLock(f func() error) error {
	return lockfile.With(filepath.Join(c.dir, "lock"), f)
}

func (c *Disk) readStats() Stats {
	var s Stats
	if data, err := os.ReadFile(filepath.Join(c.dir, "stats.json")); err == nil {
		json.Unmarshal(data, &s) // a damaged stats file restarts the counters
	}
	return s
}

// AddStats adds a run's counters to the stored ones.
func (c *Disk) AddStats(delta Stats) error {
	return c.withLock(func() error {
		s := c.readStats()
		s.Hits += delta.Hits
		s.Misses += delta.Misses
		s.Evictions += delta.Evictions
		s.EvictedBytes += delta.EvictedBytes
		if delta.Limit > 0 {
			s.Limit = delta.Limit
		}
		s.SavedCPU += delta.SavedCPU
		s.ApproxBytes += delta.ApproxBytes
		return c.writeStats(s)
	})
}

type entry struct {
	path string
	size int64
	used time.Time
}

func (c *Disk) entries() ([]entry, error) {
	var es []entry
	for _, sub := range []string{"cas", "ac"} {
		err := filepath.WalkDir(filepath.Join(c.dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed by a concurrent eviction
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			es = append(es, entry{path: p, size: fi.Size(), used: fi.ModTime()})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return es, nil
}

// Stats returns the stored counters and the current size.
func (c *Disk) Stats() (Stats, error) {
	s := c.readStats()
	es, err := c.entries()
	if err != nil {
		return s, err
	}
	for _, e := range es {
		if c.isRecord(e.path) {
			s.Entries++
		}
		s.Bytes += e.size
	}
	return s, nil
}

// isRecord reports whether an entry's file is an action record (ac/) rather
// than a blob.
func (c *Disk) isRecord(path string) bool {
	return filepath.Base(filepath.Dir(filepath.Dir(path))) == "ac"
}

// ZeroStats resets the counters (hits, misses, evictions, saved CPU time)
// and keeps every entry.
func (c *Disk) ZeroStats() error {
	return c.withLock(func() error {
		s := c.readStats()
		return c.writeStats(Stats{ApproxBytes: s.ApproxBytes, Limit: s.Limit})
	})
}

// Finish records a run's counters and, when the cache may have grown past
// limit, trims it.
func (c *Disk) Finish(run Stats, limit int64) error {
	run.ApproxBytes = c.written.Swap(0)
	run.Limit = limit
	if err := c.AddStats(run); err != nil {
		return err
	}
	if c.readStats().ApproxBytes <= limit {
		return nil
	}
	_, err := c.Trim(limit)
	return err
}

// Trim evicts least recently used files until the cache holds at most
// limit bytes, and returns how many files it removed. An action record
// whose blob was evicted is harmless: reading it finds the blob missing and
// counts a miss. The stats count evicted entries (action records) and
// bytes.
func (c *Disk) Trim(limit int64) (evicted int64, err error) {
	var entries, bytes int64
	err = c.withLock(func() error {
		es, err := c.entries()
		if err != nil {
			return err
		}
		var total int64
		for _, e := range es {
			total += e.size
		}
		if total <= limit {
			return c.setApprox(total)
		}
		sort.Slice(es, func(i, j int) bool { return es[i].used.Before(es[j].used) })
		for _, e := range es {
			if total <= limit {
				break
			}
			if os.Remove(e.path) == nil {
				total -= e.size
				evicted++
				bytes += e.size
				if c.isRecord(e.path) {
					entries++
				}
			}
		}
		if err := c.setApprox(total); err != nil {
			return err
		}
		// Temporary files of writers that died.
		tmps, _ := os.ReadDir(filepath.Join(c.dir, "tmp"))
		for _, t := range tmps {
			if fi, err := t.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(filepath.Join(c.dir, "tmp", t.Name()))
			}
		}
		return nil
	})
	if evicted > 0 {
		c.AddStats(Stats{Evictions: entries, EvictedBytes: bytes})
	}
	return evicted, err
}

// setApprox records the measured size; the caller holds the lock.
func (c *Disk) setApprox(total int64) error {
	s := c.readStats()
	s.ApproxBytes = total
	return c.writeStats(s)
}

func (c *Disk) writeStats(s Stats) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return c.writeAtomic(filepath.Join(c.dir, "stats.json"), func(w io.Writer) error { _, err := w.Write(data); return err })
}

// Clear removes every entry and resets the counters.
func (c *Disk) Clear() error {
	return c.withLock(func() error {
		for _, sub := range []string{"cas", "ac", "tmp"} {
			if err := os.RemoveAll(filepath.Join(c.dir, sub)); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(c.dir, sub), 0o755); err != nil {
				return err
			}
		}
		if err := os.Remove(filepath.Join(c.dir, "stats.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}
