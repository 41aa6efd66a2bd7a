package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/sys/digest"
)

// errCorrupt is a blob whose content does not match its digest. Reads retry
// it (it may be a transmission fault), then give up.
type errCorrupt struct{ d digest.Digest }

func (e *errCorrupt) Error() string {
	return fmt.Sprintf("the server sent blob %s with content that does not match its digest", e.d)
}

// ReadBytes reads blob d and verifies it, counting it in m. A corrupt read
// is tried again, within the same MaxAttempts bound as transient errors.
func (c *Client) ReadBytes(ctx context.Context, m Meter, d digest.Digest) ([]byte, error) {
	if d.Size == 0 {
		return nil, nil
	}
	var data []byte
	corrupted := false
	retryable := func(err error) bool { return transient(err) || status.Code(err) == codes.DataLoss }
	err := c.retryWhile(ctx, c.opts.RetryWindow, retryable, func(ctx context.Context) error {
		var err error
		data, err = c.readOne(ctx, d)
		if err != nil {
			return err
		}
		if digest.OfBytes(data) != d {
			corrupted = true
			return status.Error(codes.DataLoss, (&errCorrupt{d}).Error())
		}
		return nil
	})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, fmt.Errorf("blob %s: %w", d, errNotFound)
		}
		if corrupted && status.Code(err) == codes.DataLoss {
			return nil, &errCorrupt{d}
		}
		return nil, err
	}
	c.read(m, d)
	return data, nil
}

// readOne reads blob d, unverified, in a batch of its own when it fits and
// with ByteStream otherwise (streamedDown included) or when the server
// refuses the batch.
func (c *Client) readOne(ctx context.Context, d digest.Digest) ([]byte, error) {
	if d.Size+perBlobOverhead > c.batchData() || c.streamedDown(d) {
		return c.streamRead(ctx, d)
	}
	got, errs, err := c.batchRead(ctx, []digest.Digest{d})
	var rej *batchRejected
	if errors.As(err, &rej) {
		c.lowerBatchLimit(d.Size + perBlobOverhead)
		return c.streamRead(ctx, d)
	}
	if err != nil {
		return nil, err
	}
	if err := errs[d]; err != nil {
		return nil, err
	}
	return got[d], nil
}

// ReadBlobs reads and verifies the blobs ds (an action's outputs and its
// stderr): those that fit in as few BatchReadBlobs calls as the batch limit
// allows, the others with ByteStream. A blob the server lacks is an error
// wrapping errNotFound. What is read counts in m.
func (c *Client) ReadBlobs(ctx context.Context, m Meter, ds []digest.Digest) (map[digest.Digest][]byte, error) {
	out := map[digest.Digest][]byte{}
	var single, batch []digest.Digest
	var batchSize int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var got map[digest.Digest][]byte
		var errs map[digest.Digest]error
		err := c.retry(ctx, func(ctx context.Context) error {
			var err error
			got, errs, err = c.batchRead(ctx, batch)
			return err
		})
		var rej *batchRejected
		if errors.As(err, &rej) {
			c.lowerBatchLimit(batchSize)
			got, errs, err = nil, nil, nil
		}
		if err != nil {
			return err
		}
		for _, d := range batch {
			if status.Code(errs[d]) == codes.NotFound {
				return fmt.Errorf("blob %s: %w", d, errNotFound)
			}
			data, ok := got[d]
			if !ok || digest.OfBytes(data) != d {
				single = append(single, d) // read it alone (a corrupt read is tried again there)
				continue
			}
			out[d] = data
			c.read(m, d)
		}
		batch, batchSize = nil, 0
		return nil
	}
	limit := c.batchData()
	for _, d := range ds {
		if _, ok := out[d]; ok || slices.Contains(batch, d) || slices.Contains(single, d) {
			continue
		}
		switch {
		case d.Size == 0:
			out[d] = nil
		case d.Size+perBlobOverhead > limit || c.streamedDown(d):
			single = append(single, d)
		default:
			if batchSize+d.Size+perBlobOverhead > limit {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			batch = append(batch, d)
			batchSize += d.Size + perBlobOverhead
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for _, d := range single {
		data, err := c.ReadBytes(ctx, m, d)
		if err != nil {
			return nil, err
		}
		out[d] = data
	}
	return out, nil
}

// ReadFile reads blob d into the file dst (created or replaced) and
// verifies it, counting it in m.
func (c *Client) ReadFile(ctx context.Context, m Meter, d digest.Digest, dst string) error {
	data, err := c.ReadBytes(ctx, m, d)
	if err != nil {
		return err
	}
	return writeFile(dst, data)
}

// batchRead makes one BatchReadBlobs call for ds. It returns the content
// the server sent for each blob (decompressed, not verified) and the error
// of each blob it could not send. A call refused as too large is a
// *batchRejected.
func (c *Client) batchRead(ctx context.Context, ds []digest.Digest) (map[digest.Digest][]byte, map[digest.Digest]error, error) {
	r, err := c.reads.do(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	return r.got, r.errs, r.err
}

// read is the answer of a coalesced BatchReadBlobs to one request.
type read struct {
	got  map[digest.Digest][]byte
	errs map[digest.Digest]error
	err  error
}

// newReads coalesces the BatchReadBlobs calls of the actions in flight.
func (c *Client) newReads() *coalescer[[]digest.Digest, read] {
	size := func(ds []digest.Digest) (n int64) {
		for _, d := range ds {
			n += d.Size + perBlobOverhead
		}
		return n
	}
	return &coalescer[[]digest.Digest, read]{window: coalesceWindow,
		fits: func(reqs [][]digest.Digest, next []digest.Digest) bool {
			n := size(next)
			for _, r := range reqs {
				n += size(r)
			}
			return n <= c.batchData()
		},
		run: func(ctx context.Context, reqs [][]digest.Digest) []read {
			var all []digest.Digest
			for _, r := range reqs {
				for _, d := range r {
					if !slices.Contains(all, d) {
						all = append(all, d)
					}
				}
			}
			cctx, cancel := context.WithTimeout(c.withMD(ctx), c.opts.RPCTimeout)
			got, errs, err := c.batchReadNow(cctx, all)
			cancel()
			out := make([]read, len(reqs))
			for i, r := range reqs {
				out[i] = read{got: map[digest.Digest][]byte{}, errs: map[digest.Digest]error{}, err: err}
				for _, d := range r {
					if b, ok := got[d]; ok {
						out[i].got[d] = b
					}
					if e, ok := errs[d]; ok {
						out[i].errs[d] = e
					}
				}
			}
			return out
		},
	}
}

// batchReadNow is one BatchReadBlobs call for ds.
func (c *Client) batchReadNow(ctx context.Context, ds []digest.Digest) (map[digest.Digest][]byte, map[digest.Digest]error, error) {
	req := &repb.BatchReadBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
	var size, largest int64
	for _, d := range ds {
		req.Digests = append(req.Digests, d.Proto())
		size, largest = size+d.Size, max(largest, d.Size)
	}
	if c.zstdDown(largest) {
		req.AcceptableCompressors = []repb.Compressor_Value{repb.Compressor_ZSTD}
	}
	end := c.link.meter(down).begin(size)
	resp, err := c.cas.BatchReadBlobs(ctx, req)
	if tooLarge(err) {
		end(0, false)
		return nil, nil, &batchRejected{err}
	}
	if err != nil {
		end(0, false)
		return nil, nil, err
	}
	var wire int64
	for _, r := range resp.Responses {
		wire += int64(len(r.GetData()))
	}
	end(wire, true)
	got := map[digest.Digest][]byte{}
	errs := map[digest.Digest]error{}
	for _, r := range resp.Responses {
		d, err := digest.FromProto(r.GetDigest())
		if err != nil || !slices.Contains(ds, d) {
			return nil, nil, fmt.Errorf("BatchReadBlobs answered a blob that was not asked for")
		}
		if s := status.FromProto(r.Status); s.Code() != codes.OK {
			errs[d] = s.Err()
			continue
		}
		switch r.Compressor {
		case repb.Compressor_IDENTITY:
			got[d] = r.Data
		case repb.Compressor_ZSTD:
			// Into a buffer of the blob's size: from nil, the decoder
			// guesses twice the input, then grows.
			data, err := c.dec.DecodeAll(r.Data, make([]byte, 0, d.Size))
			if err != nil {
				errs[d] = status.Errorf(codes.DataLoss, "zstd: %v", err)
				continue
			}
			got[d] = data
		default:
			errs[d] = fmt.Errorf("BatchReadBlobs answered with compressor %v", r.Compressor)
		}
	}
	for _, d := range ds {
		if _, ok := got[d]; !ok && errs[d] == nil {
			errs[d] = status.Errorf(codes.DataLoss, "BatchReadBlobs did not answer blob %s", d)
		}
	}
	return got, errs, nil
}
