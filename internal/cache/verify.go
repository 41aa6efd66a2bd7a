package cache

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sys/digest"
)

// Corrupt is an entry of the cache that must not be used.
type Corrupt struct {
	Path    string
	Problem string
	// Removed says that Verify removed it (with fix).
	Removed bool
}

// VerifyStats are what Verify looked at.
type VerifyStats struct {
	Blobs, Records int
	Corrupt        []Corrupt
}

// Verify reads every entry of the cache and checks it: each blob's content
// has the digest it is named by; each action record has its checksum,
// parses, records a success, and its object (when stored) is an ELF or COFF
// object. A record whose blobs were evicted is not corrupt: reading it is a
// miss. With fix, corrupt entries are removed (a record whose object is bad
// goes with it).
//
// Links may use the cache meanwhile: entries appear by rename and vanish by
// eviction, so a file that disappears while it is read is skipped, and
// what is read is always a whole file.
func (c *Disk) Verify(ctx context.Context, fix bool) (VerifyStats, error) {
	var st VerifyStats
	report := func(path, problem string, also ...string) {
		cr := Corrupt{Path: path, Problem: problem}
		if fix {
			cr.Removed = removeGone(path)
			for _, p := range also {
				removeGone(p)
			}
		}
		st.Corrupt = append(st.Corrupt, cr)
	}
	badBlobs := map[string]bool{}
	err := walkFiles(filepath.Join(c.dir, "cas"), func(p string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := digest.OfFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		st.Blobs++
		if d.HexHash() != filepath.Base(p) {
			badBlobs[p] = true
			report(p, fmt.Sprintf("its content has the digest %s, not the one it is named by", d.HexHash()))
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	err = walkFiles(filepath.Join(c.dir, "ac"), func(p string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		st.Records++
		if problem, blob := c.checkRecord(data, badBlobs); problem != "" {
			var also []string
			if blob != "" {
				also = append(also, blob)
			}
			report(p, problem, also...)
		}
		return nil
	})
	return st, err
}

// checkRecord returns what is wrong with an action record, or "", and the
// path of a stored blob that is wrong with it.
func (c *Disk) checkRecord(data []byte, badBlobs map[string]bool) (problem, blob string) {
	if len(data) < sha256.Size || sha256.Sum256(data[sha256.Size:]) != [32]byte(data[:sha256.Size]) {
		return "its checksum does not match its content (truncated or damaged)", ""
	}
	res := &repb.ActionResult{}
	if err := proto.Unmarshal(data[sha256.Size:], res); err != nil {
		return fmt.Sprintf("it does not parse: %v", err), ""
	}
	if res.ExitCode != 0 {
		return fmt.Sprintf("it records a failure (exit code %d)", res.ExitCode), ""
	}
	for _, f := range res.OutputFiles {
		d, err := digest.FromProto(f.Digest)
		if err != nil {
			return fmt.Sprintf("output %s: %v", f.Path, err), ""
		}
		p := c.casPath(d)
		if badBlobs[p] {
			return fmt.Sprintf("output %s is the corrupt blob %s", f.Path, d.HexHash()), ""
		}
		if f.Path != outputName(0) {
			continue
		}
		if err := executor.CheckObject(p); err != nil {
			if _, serr := os.Stat(p); errors.Is(serr, fs.ErrNotExist) {
				continue // evicted: a miss, not a corruption
			}
			return fmt.Sprintf("its object %s is not an object file: %v", p, err), p
		}
	}
	return "", ""
}

// walkFiles calls f for every regular file under dir; a directory that
// vanishes meanwhile (eviction) is skipped.
func walkFiles(dir string, f func(path string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		return f(p)
	})
}

// removeGone removes p and reports whether it is gone.
func removeGone(p string) bool {
	err := os.Remove(p)
	return err == nil || errors.Is(err, fs.ErrNotExist)
}
