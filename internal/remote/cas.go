package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/digest"
)

// perBlobOverhead is what one blob adds to a batch request besides its
// data (digest, status, framing), counted so a batch stays under the limit.
const perBlobOverhead = 256

// findMissingChunk bounds the digests of one FindMissingBlobs call.
const findMissingChunk = 4096

// streamChunk is the size of one ByteStream message.
const streamChunk = 1 << 20

// Counters are what the CAS client did in a run (for bench figures and
// `--trace`-style reports).
type Counters struct {
	FindMissingCalls, BatchUpdateCalls, StreamWrites atomic.Int64
	BatchReadCalls, StreamReads                      atomic.Int64
	BlobsRequested, BytesRequested                   atomic.Int64 // distinct blobs the run needed in the CAS
	BlobsUploaded, BytesUploaded, WireBytesUploaded  atomic.Int64
	BlobsRead, BytesRead                             atomic.Int64
}

// Uploader makes blobs present in the CAS: it asks FindMissingBlobs and
// uploads only what is missing, and each distinct blob at most once per run
// however many actions need it (concurrent requests for one blob wait for
// the first).
type Uploader struct {
	c        *Client
	mu       sync.Mutex
	m        map[digest.Digest]*upload
	Counters Counters
}

type upload struct {
	done chan struct{}
	err  error
}

func newUploader(c *Client) *Uploader { return &Uploader{c: c, m: map[digest.Digest]*upload{}} }

// MarkPresent records that d is in the CAS (e.g. an output just read from
// it), so storing it again costs nothing.
func (u *Uploader) MarkPresent(d digest.Digest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.m[d]; !ok {
		e := &upload{done: make(chan struct{})}
		close(e.done)
		u.m[d] = e
	}
}

// Forget drops what the run knows of d (the server said it is missing after
// all), so the next Ensure uploads it again.
func (u *Uploader) Forget(d digest.Digest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if e, ok := u.m[d]; ok {
		select {
		case <-e.done:
			delete(u.m, d)
		default:
		}
	}
}

// Ensure makes every blob (contents in memory) and file (digest → local
// path) present in the CAS.
func (u *Uploader) Ensure(ctx context.Context, blobs map[digest.Digest][]byte, files map[digest.Digest]string) error {
	var mine []digest.Digest
	var wait []*upload
	mineSet := map[digest.Digest]*upload{}
	u.mu.Lock()
	claim := func(d digest.Digest) {
		if e, ok := u.m[d]; ok {
			if _, own := mineSet[d]; !own {
				wait = append(wait, e)
			}
			return
		}
		e := &upload{done: make(chan struct{})}
		u.m[d] = e
		mineSet[d] = e
		mine = append(mine, d)
		u.Counters.BlobsRequested.Add(1)
		u.Counters.BytesRequested.Add(d.Size)
	}
	for d := range blobs {
		claim(d)
	}
	for d := range files {
		claim(d)
	}
	u.mu.Unlock()

	if len(mine) > 0 {
		errs := u.uploadMissing(ctx, mine, blobs, files)
		u.mu.Lock()
		for _, d := range mine {
			e := mineSet[d]
			e.err = errs[d]
			if e.err != nil {
				delete(u.m, d) // let a later action try again
			}
			close(e.done)
		}
		u.mu.Unlock()
		for _, d := range mine {
			if err := errs[d]; err != nil {
				return err
			}
		}
	}
	for _, e := range wait {
		select {
		case <-e.done:
			if e.err != nil {
				return e.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// uploadMissing uploads those of ds the server lacks; the error of each
// digest that could not be made present is in the map.
func (u *Uploader) uploadMissing(ctx context.Context, ds []digest.Digest, blobs map[digest.Digest][]byte, files map[digest.Digest]string) map[digest.Digest]error {
	errs := map[digest.Digest]error{}
	failAll := func(ds []digest.Digest, err error) {
		for _, d := range ds {
			errs[d] = err
		}
	}
	var missing []digest.Digest
	for start := 0; start < len(ds); start += findMissingChunk {
		chunk := ds[start:min(start+findMissingChunk, len(ds))]
		m, err := u.c.FindMissing(ctx, chunk)
		u.Counters.FindMissingCalls.Add(1)
		if err != nil {
			failAll(chunk, fmt.Errorf("FindMissingBlobs: %w", err))
			continue
		}
		missing = append(missing, m...)
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Size < missing[j].Size })
	content := func(d digest.Digest) ([]byte, error) {
		if b, ok := blobs[d]; ok {
			return b, nil
		}
		data, err := os.ReadFile(files[d])
		if err != nil {
			return nil, err
		}
		if digest.OfBytes(data) != d {
			return nil, fmt.Errorf("%s changed while thindist was running", files[d])
		}
		return data, nil
	}
	limit := u.c.batchData()
	var batch []digest.Digest
	var batchData [][]byte
	var batchSize int64
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := u.c.batchUpdate(ctx, batch, batchData); err != nil {
			failAll(batch, err)
		} else {
			u.Counters.BatchUpdateCalls.Add(1)
			for _, d := range batch {
				u.Counters.BlobsUploaded.Add(1)
				u.Counters.BytesUploaded.Add(d.Size)
			}
		}
		batch, batchData, batchSize = nil, nil, 0
	}
	for _, d := range missing {
		if d.Size+perBlobOverhead > limit {
			flush()
			wire, err := u.c.streamWrite(ctx, d, func() ([]byte, error) { return content(d) })
			if err != nil {
				errs[d] = fmt.Errorf("uploading %s: %w", d, err)
				continue
			}
			u.Counters.StreamWrites.Add(1)
			u.Counters.BlobsUploaded.Add(1)
			u.Counters.BytesUploaded.Add(d.Size)
			u.Counters.WireBytesUploaded.Add(wire)
			continue
		}
		data, err := content(d)
		if err != nil {
			errs[d] = err
			continue
		}
		if batchSize+d.Size+perBlobOverhead > limit {
			flush()
		}
		batch = append(batch, d)
		batchData = append(batchData, data)
		batchSize += d.Size + perBlobOverhead
	}
	flush()
	return errs
}

// FindMissing returns those of ds the CAS lacks.
func (c *Client) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	req := &repb.FindMissingBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
	for _, d := range ds {
		req.BlobDigests = append(req.BlobDigests, d.Proto())
	}
	var resp *repb.FindMissingBlobsResponse
	err := c.retry(ctx, "FindMissingBlobs", func(ctx context.Context) error {
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
		if c.zstdBatch {
			r.Data = c.enc.EncodeAll(data[i], nil)
			r.Compressor = repb.Compressor_ZSTD
		}
		wire += int64(len(r.Data))
		req.Requests = append(req.Requests, r)
	}
	c.CAS.Counters.WireBytesUploaded.Add(wire)
	return c.retry(ctx, "BatchUpdateBlobs", func(ctx context.Context) error {
		resp, err := c.cas.BatchUpdateBlobs(ctx, req)
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
}

func (c *Client) resource(kind string, d digest.Digest, compressed bool) string {
	name := "blobs/" + d.String()
	if compressed {
		name = "compressed-blobs/zstd/" + d.String()
	}
	if kind != "" {
		name = kind + "/" + name
	}
	if c.opts.Instance != "" {
		name = c.opts.Instance + "/" + name
	}
	return name
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// streamWrite uploads one blob with ByteStream Write and returns the bytes
// sent.
func (c *Client) streamWrite(ctx context.Context, d digest.Digest, content func() ([]byte, error)) (int64, error) {
	data, err := content()
	if err != nil {
		return 0, err
	}
	if c.zstdUpload {
		data = c.enc.EncodeAll(data, nil)
	}
	err = c.retry(ctx, "ByteStream.Write", func(ctx context.Context) error {
		stream, err := c.bs.Write(ctx)
		if err != nil {
			return err
		}
		name := c.resource("uploads/"+uuid(), d, c.zstdUpload)
		off := 0
		for {
			n := min(streamChunk, len(data)-off)
			req := &bytestream.WriteRequest{WriteOffset: int64(off), Data: data[off : off+n], FinishWrite: off+n == len(data)}
			if off == 0 {
				req.ResourceName = name
			}
			if err := stream.Send(req); err != nil {
				if err == io.EOF {
					break // the server ended the stream early (blob present): the status is in CloseAndRecv
				}
				return err
			}
			off += n
			if off == len(data) {
				break
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return err
		}
		if cs := resp.GetCommittedSize(); cs != int64(len(data)) && cs != d.Size && cs != -1 {
			return fmt.Errorf("ByteStream.Write committed %d bytes of %d", cs, len(data))
		}
		return nil
	})
	return int64(len(data)), err
}

// errCorrupt is a blob whose content does not match its digest. Reads retry
// it (it may be a transmission fault), then give up.
type errCorrupt struct{ d digest.Digest }

func (e *errCorrupt) Error() string {
	return fmt.Sprintf("the server sent blob %s with content that does not match its digest", e.d)
}

// ReadBytes reads blob d and verifies it.
func (c *Client) ReadBytes(ctx context.Context, d digest.Digest) ([]byte, error) {
	if d.Size == 0 {
		return nil, nil
	}
	var data []byte
	var lastCorrupt error
	err := c.retryRead(ctx, func(ctx context.Context) error {
		var err error
		if d.Size+perBlobOverhead <= c.batchData() {
			data, err = c.batchRead(ctx, d)
		} else {
			data, err = c.streamRead(ctx, d)
		}
		if err != nil {
			return err
		}
		if digest.OfBytes(data) != d {
			lastCorrupt = &errCorrupt{d}
			return status.Error(codes.DataLoss, lastCorrupt.Error())
		}
		return nil
	})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, fmt.Errorf("blob %s: %w", d, errNotFound)
		}
		if lastCorrupt != nil && status.Code(err) == codes.DataLoss {
			return nil, lastCorrupt
		}
		return nil, err
	}
	c.CAS.Counters.BlobsRead.Add(1)
	c.CAS.Counters.BytesRead.Add(d.Size)
	return data, nil
}

// retryRead is retry that also tries a corrupt read again.
func (c *Client) retryRead(ctx context.Context, f func(ctx context.Context) error) error {
	var err error
	for attempt := 1; attempt <= c.opts.MaxAttempts; attempt++ {
		err = c.retry(ctx, "read", f)
		if status.Code(err) != codes.DataLoss || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// ReadFile reads blob d into the file dst (created or replaced) and
// verifies it.
func (c *Client) ReadFile(ctx context.Context, d digest.Digest, dst string) error {
	data, err := c.ReadBytes(ctx, d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func (c *Client) batchRead(ctx context.Context, d digest.Digest) ([]byte, error) {
	req := &repb.BatchReadBlobsRequest{InstanceName: c.opts.Instance, Digests: []*repb.Digest{d.Proto()},
		DigestFunction: repb.DigestFunction_SHA256}
	if c.zstdRead {
		req.AcceptableCompressors = []repb.Compressor_Value{repb.Compressor_ZSTD}
	}
	resp, err := c.cas.BatchReadBlobs(ctx, req)
	c.CAS.Counters.BatchReadCalls.Add(1)
	if err != nil {
		return nil, err
	}
	if len(resp.Responses) != 1 {
		return nil, fmt.Errorf("BatchReadBlobs answered %d blobs for 1", len(resp.Responses))
	}
	r := resp.Responses[0]
	if s := status.FromProto(r.Status); s.Code() != codes.OK {
		return nil, s.Err()
	}
	switch r.Compressor {
	case repb.Compressor_IDENTITY:
		return r.Data, nil
	case repb.Compressor_ZSTD:
		data, err := c.dec.DecodeAll(r.Data, nil)
		if err != nil {
			return nil, status.Errorf(codes.DataLoss, "zstd: %v", err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("BatchReadBlobs answered with compressor %v", r.Compressor)
}

func (c *Client) streamRead(ctx context.Context, d digest.Digest) ([]byte, error) {
	stream, err := c.bs.Read(ctx, &bytestream.ReadRequest{ResourceName: c.resource("", d, c.zstdRead)})
	c.CAS.Counters.StreamReads.Add(1)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		buf.Write(msg.Data)
		if int64(buf.Len()) > 2*d.Size+(1<<20) {
			return nil, status.Errorf(codes.DataLoss, "ByteStream.Read sent more than blob %s holds", d)
		}
	}
	if c.zstdRead {
		data, err := c.dec.DecodeAll(buf.Bytes(), nil)
		if err != nil {
			return nil, status.Errorf(codes.DataLoss, "zstd: %v", err)
		}
		return data, nil
	}
	return buf.Bytes(), nil
}

// batchData is how many bytes of blobs (with their per-blob overhead) one
// batch request carries: the server's limit less room for the request's
// own framing.
func (c *Client) batchData() int64 { return c.batchLimit - min(4096, c.batchLimit/16) }
