// Package cache keeps backend results so that no backend compiles twice for
// the same inputs. Store is one small interface over where results live (a
// directory on this machine, or a remote CAS and ActionCache), and Executor
// is a decorator that consults a Store before running the next executor and
// fills it afterwards, keyed by reapi.Keyer's canonical Action digest.
package cache

import (
	"context"
	"errors"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/sys/digest"
)

// ErrNotFound is a miss.
var ErrNotFound = errors.New("not in the cache")

// ErrUnavailable is the error of a store that cannot be used for the rest
// of the run (a remote service found down, and said so once): the actions
// run without it, and nothing more is said of it.
var ErrUnavailable = errors.New("the cache is unavailable for the rest of the run")

// Meter counts the bytes one action moves to and from a store
// (executor.Transfer is one, handed down as executor.Job.Meter): the calls
// of a Store that move bytes take one, and a store that moves none over a
// network ignores it. Nil counts nothing.
type Meter interface {
	Sent(n int64)
	Received(n int64)
}

// Store keeps action results and the blobs they name, the way REAPI's
// ActionCache and ContentAddressableStorage do.
type Store interface {
	// GetActionResult returns the result stored under key, or ErrNotFound.
	// inline names output files whose contents the store may return in
	// the result itself (OutputFile.Contents, as REAPI's inline_output_files
	// asks a server to), saving a read each; a hint that stores may ignore.
	GetActionResult(ctx context.Context, m Meter, key digest.Digest, inline []string) (*repb.ActionResult, error)
	// UpdateActionResult stores res under key. Its blobs are written first.
	UpdateActionResult(ctx context.Context, key digest.Digest, res *repb.ActionResult) error
	// ReadBlob writes blob d to the file dst and verifies its digest. A blob
	// that is missing is ErrNotFound; one that fails verification is an
	// error and the store forgets it.
	ReadBlob(ctx context.Context, m Meter, d digest.Digest, dst string) error
	// ReadBlobBytes returns a small blob (stdout, stderr), verified.
	ReadBlobBytes(ctx context.Context, m Meter, d digest.Digest) ([]byte, error)
	// WriteBlob stores the content of file src, whose digest is d.
	WriteBlob(ctx context.Context, m Meter, d digest.Digest, src string) error
	// WriteBlobBytes stores data, whose digest is d.
	WriteBlobBytes(ctx context.Context, m Meter, d digest.Digest, data []byte) error
}

// HeadReader is a Store that can also return the first bytes of a blob it
// places, read as it verifies the blob: a hit checks the object it placed
// (executor.CheckObjectBytes) without opening it once more.
type HeadReader interface {
	// ReadBlobHead is ReadBlob that also copies the blob's first
	// len(head) bytes into head, returning how many (fewer only for a
	// shorter blob).
	ReadBlobHead(ctx context.Context, m Meter, d digest.Digest, dst string, head []byte) (int, error)
}
