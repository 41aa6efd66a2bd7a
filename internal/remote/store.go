package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/sys/digest"
)

// Store is a cache.Store over the service's ActionCache and CAS: with
// cache.NewExecutor and reapi.Keyer it is a team-wide cache under the same
// canonical key as the local one.
type Store struct {
	c *Client
	// updateDenied is set once the server refuses UpdateActionResult, so
	// the run stops trying (many servers let only workers write).
	updateDenied atomic.Bool
}

// NewStore returns the store.
func NewStore(c *Client) *Store {
	s := &Store{c: c}
	s.updateDenied.Store(!c.ACUpdateEnabled())
	return s
}

var (
	_ cache.Store      = (*Store)(nil)
	_ cache.BulkWriter = (*Store)(nil)
	_ cache.KnownBlobs = (*Store)(nil)
)

// GetActionResult implements cache.Store.
func (s *Store) GetActionResult(ctx context.Context, m cache.Meter, key digest.Digest, inline []string) (*repb.ActionResult, error) {
	var ar *repb.ActionResult
	err := s.c.retry(forAction(ctx, "", key), func(ctx context.Context) error {
		var err error
		ar, err = s.c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{
			InstanceName: s.c.opts.Instance, ActionDigest: key.Proto(), DigestFunction: repb.DigestFunction_SHA256,
			InlineStderr: true, InlineOutputFiles: inline,
		})
		return err
	})
	if status.Code(err) == codes.NotFound {
		return nil, cache.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("GetActionResult: %w", err)
	}
	s.c.inlined(m, ar)
	return ar, nil
}

// UpdateActionResult implements cache.Store.
func (s *Store) UpdateActionResult(ctx context.Context, key digest.Digest, res *repb.ActionResult) error {
	if s.updateDenied.Load() {
		return nil
	}
	err := s.c.retry(forAction(ctx, "", key), func(ctx context.Context) error {
		_, err := s.c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{
			InstanceName: s.c.opts.Instance, ActionDigest: key.Proto(), ActionResult: res,
			DigestFunction: repb.DigestFunction_SHA256,
		})
		return err
	})
	if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unimplemented {
		s.updateDenied.Store(true)
		return fmt.Errorf("the server does not let thindist write its ActionCache (%v); results are not shared", err)
	}
	return err
}

// ReadBlob implements cache.Store.
func (s *Store) ReadBlob(ctx context.Context, m cache.Meter, d digest.Digest, dst string) error {
	err := s.c.ReadFile(ctx, m, d, dst)
	if errors.Is(err, errNotFound) {
		return cache.ErrNotFound
	}
	if err == nil {
		s.c.CAS.MarkPresent(d)
	}
	return err
}

// ReadBlobBytes implements cache.Store.
func (s *Store) ReadBlobBytes(ctx context.Context, m cache.Meter, d digest.Digest) ([]byte, error) {
	b, err := s.c.ReadBytes(ctx, m, d)
	if errors.Is(err, errNotFound) {
		return nil, cache.ErrNotFound
	}
	return b, err
}

// WriteBlob implements cache.Store.
func (s *Store) WriteBlob(ctx context.Context, m cache.Meter, d digest.Digest, src string) error {
	return s.c.CAS.Ensure(ctx, m, nil, map[digest.Digest]string{d: src})
}

// HasBlob implements cache.KnownBlobs: the blobs this run uploaded, or
// found or read in the CAS (a remote execution's outputs).
func (s *Store) HasBlob(d digest.Digest) bool { return s.c.CAS.Present(d) }

// WriteBlobsBytes implements cache.BulkWriter: one FindMissingBlobs for
// all of them if ask, and batched uploads of those the service lacks (of
// all, if not ask).
func (s *Store) WriteBlobsBytes(ctx context.Context, m cache.Meter, blobs map[digest.Digest][]byte, ask bool) error {
	if !ask {
		return s.c.CAS.EnsureNew(ctx, m, blobs, nil)
	}
	return s.c.CAS.Ensure(ctx, m, blobs, nil)
}

// WriteBlobBytes implements cache.Store.
func (s *Store) WriteBlobBytes(ctx context.Context, m cache.Meter, d digest.Digest, data []byte) error {
	return s.c.CAS.Ensure(ctx, m, map[digest.Digest][]byte{d: data}, nil)
}
