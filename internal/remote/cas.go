package remote

import (
	"context"
	"fmt"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/sys/digest"
)

// perBlobOverhead is what one blob adds to a batch request besides its
// data (digest, status, framing), counted so a batch stays under the limit.
const perBlobOverhead = 256

// findMissingChunk bounds the digests of one FindMissingBlobs call.
const findMissingChunk = 4096

// Meter counts the bytes one action moves to and from the service, beside
// the run's totals (Client.Stats): the calls that move blobs for an action
// take one (the action's executor.Transfer, handed down the chain as
// executor.Job.Meter). Nil counts nothing: what is moved for no one action
// (a group's execution, the doctor's checks) counts in the totals only.
type Meter interface {
	Sent(n int64)
	Received(n int64)
}

// TransferStats are the CAS transfers of a run.
type TransferStats struct {
	// BytesRequested is the size of the distinct blobs the run needed
	// in the CAS, present or not.
	BytesRequested int64
	// Uploads: blobs, their size, and what was sent for them (less with
	// zstd); BatchUpdateCalls and StreamWrites are the calls that sent
	// them.
	BlobsUploaded, BytesUploaded, WireBytesUploaded int64
	BatchUpdateCalls, StreamWrites                  int64
	// BytesRead is what was read as blobs; BytesInlined what came
	// inlined in action results (outputs, stdout, stderr).
	BytesRead, BytesInlined int64
}

// transferCounters are TransferStats as they are counted.
type transferCounters struct {
	bytesRequested                                  atomic.Int64
	blobsUploaded, bytesUploaded, wireBytesUploaded atomic.Int64
	batchUpdateCalls, streamWrites                  atomic.Int64
	bytesRead, bytesInlined                         atomic.Int64
}

// Stats returns the CAS transfers of c so far.
func (c *Client) Stats() TransferStats {
	t := &c.transfers
	return TransferStats{
		BytesRequested: t.bytesRequested.Load(),
		BlobsUploaded:  t.blobsUploaded.Load(), BytesUploaded: t.bytesUploaded.Load(), WireBytesUploaded: t.wireBytesUploaded.Load(),
		BatchUpdateCalls: t.batchUpdateCalls.Load(), StreamWrites: t.streamWrites.Load(),
		BytesRead: t.bytesRead.Load(), BytesInlined: t.bytesInlined.Load(),
	}
}

// uploaded counts blob d as uploaded, for the run and in m, the meter of
// the action that claimed it in Ensure, i.e. the first action of the run
// to need it (others needing it at the same time wait and count nothing).
func (u *Uploader) uploaded(m Meter, d digest.Digest) {
	u.c.transfers.blobsUploaded.Add(1)
	u.c.transfers.bytesUploaded.Add(d.Size)
	if m != nil {
		m.Sent(d.Size)
	}
}

// read counts blob d as read, for the run and in m.
func (c *Client) read(m Meter, d digest.Digest) {
	c.transfers.bytesRead.Add(d.Size)
	if m != nil {
		m.Received(d.Size)
	}
}

// inlined counts the contents inlined in ar (outputs, stdout, stderr) as
// received, for the run and in m.
func (c *Client) inlined(m Meter, ar *repb.ActionResult) {
	n := int64(len(ar.GetStdoutRaw()) + len(ar.GetStderrRaw()))
	for _, f := range ar.GetOutputFiles() {
		n += int64(len(f.GetContents()))
	}
	c.transfers.bytesInlined.Add(n)
	if m != nil {
		m.Received(n)
	}
}

// FindMissing returns those of ds the CAS lacks.
func (c *Client) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	req := &repb.FindMissingBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
	for _, d := range ds {
		req.BlobDigests = append(req.BlobDigests, d.Proto())
	}
	var resp *repb.FindMissingBlobsResponse
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.cas.FindMissingBlobs(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]digest.Digest, 0, len(resp.MissingBlobDigests))
	for _, p := range resp.MissingBlobDigests {
		d, err := digest.FromProto(p)
		if err != nil {
			return nil, fmt.Errorf("FindMissingBlobs answered a malformed digest: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (c *Client) batchUpdate(ctx context.Context, ds []digest.Digest, data [][]byte) error {
	req := &repb.BatchUpdateBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
	wire := int64(0)
	for i, d := range ds {
		r := &repb.BatchUpdateBlobsRequest_Request{Digest: d.Proto(), Data: data[i]}
		c.link.sample(c.enc, c.dec, data[i])
		if c.zstdUp(d, true) {
			r.Data = c.enc.EncodeAll(data[i], nil)
			r.Compressor = repb.Compressor_ZSTD
		}
		wire += int64(len(r.Data))
		req.Requests = append(req.Requests, r)
	}
	err := c.retry(ctx, func(ctx context.Context) (err error) {
		end := c.link.meter(up).begin(wire)
		defer func() { end(wire, err == nil) }()
		resp, err := c.cas.BatchUpdateBlobs(ctx, req)
		if tooLarge(err) {
			return &batchRejected{err}
		}
		if err != nil {
			return err
		}
		for _, r := range resp.Responses {
			if s := status.FromProto(r.Status); s.Code() != codes.OK {
				return fmt.Errorf("BatchUpdateBlobs %s/%d: %w", r.GetDigest().GetHash(), r.GetDigest().GetSizeBytes(), s.Err())
			}
		}
		return nil
	})
	if err == nil {
		c.transfers.wireBytesUploaded.Add(wire)
	}
	return err
}

// batchRejected is a batch call that the server refused as too large
// (InvalidArgument or ResourceExhausted for the call as a whole): its
// blobs go over ByteStream instead. It deliberately hides the status code
// from retry, which must not send the same batch again.
type batchRejected struct{ err error }

func (e *batchRejected) Error() string { return "batch refused as too large: " + e.err.Error() }

// tooLarge reports whether a failed batch call may have been refused for
// its size. Buildbarn answers InvalidArgument ("Attempted to read a total
// of at least N bytes, while a maximum of M bytes is permitted"); gRPC
// itself answers ResourceExhausted for a message over its limit.
func tooLarge(err error) bool {
	c := status.Code(err)
	return c == codes.InvalidArgument || c == codes.ResourceExhausted
}

// batchData is how many bytes of blobs (with their per-blob overhead) one
// batch request carries: the server's limit less room for the request's
// own framing.
func (c *Client) batchData() int64 {
	l := c.batchLimit.Load()
	return l - min(4096, l/16)
}
