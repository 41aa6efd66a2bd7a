package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/digest"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/plainfile"
)

// perBlobOverhead is what one blob adds to a batch request besides its
// data (digest, status, framing), counted so a batch stays under the limit.
const perBlobOverhead = 256

// findMissingChunk bounds the digests of one FindMissingBlobs call.
const findMissingChunk = 4096

// streamChunk is the size of one ByteStream message.
const streamChunk = 1 << 20

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

// Uploader makes blobs present in the CAS: it asks FindMissingBlobs and
// uploads only what is missing, and each distinct blob at most once per run
// however many actions need it (concurrent requests for one blob wait for
// the first).
type Uploader struct {
	c  *Client
	mu sync.Mutex
	m  map[digest.Digest]*upload
	// The FindMissingBlobs and BatchUpdateBlobs calls of the actions in
	// flight, coalesced.
	finds   *coalescer[[]digest.Digest, found]
	updates *coalescer[blobBatch, error]
	// digested is the run's memo of input digests (UseDigests): a file
	// it has digested and that has not changed since is sent without
	// being hashed again.
	digested atomic.Pointer[digest.Files]
}

// UseDigests gives u the run's memo of file digests (the one the actions'
// keys and remote actions are built with), so that a file read for an
// upload is hashed again only if its stamp does not show it unchanged
// since the memo digested it (digest.Files.Unchanged).
func (u *Uploader) UseDigests(f *digest.Files) { u.digested.Store(f) }

// found is the answer of a coalesced FindMissingBlobs to one request.
type found struct {
	missing []digest.Digest
	err     error
}

// blobBatch is blobs of one action for a coalesced BatchUpdateBlobs.
type blobBatch struct {
	ds   []digest.Digest
	data [][]byte
	size int64 // with perBlobOverhead per blob
}

type upload struct {
	done chan struct{}
	err  error
}

// present is the entry of every digest known to be in the CAS once its
// upload (if any) has ended: one shared, finished entry instead of one with
// its own channel per digest, which for 5,000 modules kept about 6.5 MB
// live to the end of the link. It is never changed.
var present = func() *upload {
	e := &upload{done: make(chan struct{})}
	close(e.done)
	return e
}()

func newUploader(c *Client) *Uploader {
	u := &Uploader{c: c, m: map[digest.Digest]*upload{}}
	u.finds = &coalescer[[]digest.Digest, found]{window: coalesceWindow,
		fits: func(reqs [][]digest.Digest, next []digest.Digest) bool {
			n := len(next)
			for _, r := range reqs {
				n += len(r)
			}
			return n <= findMissingChunk
		},
		run: u.findMissing,
	}
	u.updates = &coalescer[blobBatch, error]{window: coalesceWindow,
		fits: func(reqs []blobBatch, next blobBatch) bool {
			n := next.size
			for _, r := range reqs {
				n += r.size
			}
			return n <= c.batchData()
		},
		run: u.batchUpdate,
	}
	return u
}

// findMissing is one FindMissingBlobs call for the requests of a batch.
func (u *Uploader) findMissing(ctx context.Context, reqs [][]digest.Digest) []found {
	var all []digest.Digest
	for _, r := range reqs {
		all = append(all, r...)
	}
	missing, err := u.c.FindMissing(ctx, all)
	out := make([]found, len(reqs))
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	set := make(map[digest.Digest]bool, len(missing))
	for _, d := range missing {
		set[d] = true
	}
	for i, r := range reqs {
		for _, d := range r {
			if set[d] {
				out[i].missing = append(out[i].missing, d)
			}
		}
	}
	return out
}

// batchUpdate is one BatchUpdateBlobs call for the requests of a batch.
func (u *Uploader) batchUpdate(ctx context.Context, reqs []blobBatch) []error {
	var ds []digest.Digest
	var data [][]byte
	for _, r := range reqs {
		ds = append(ds, r.ds...)
		data = append(data, r.data...)
	}
	err := u.c.batchUpdate(ctx, ds, data)
	if err == nil {
		u.c.transfers.batchUpdateCalls.Add(1)
	}
	out := make([]error, len(reqs))
	for i := range out {
		out[i] = err
	}
	return out
}

// MarkPresent records that d is in the CAS (e.g. an output just read from
// it), so storing it again costs nothing.
func (u *Uploader) MarkPresent(d digest.Digest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.m[d]; !ok {
		u.m[d] = present
	}
}

// Present reports whether the run knows d to be in the CAS: uploaded, or
// found or read there.
func (u *Uploader) Present(d digest.Digest) bool {
	u.mu.Lock()
	e, ok := u.m[d]
	u.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-e.done:
		return e.err == nil
	default:
		return false
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
	return u.ensure(ctx, blobs, files, true)
}

// EnsureNew is Ensure for blobs made for an action that the caches have
// just missed (its Action, Command, Directory messages and index shard):
// those are sent without asking FindMissingBlobs first, a round trip less
// before the action's Execute. Only the files are asked about. A blob the
// service had after all costs its bytes again, a few KiB.
func (u *Uploader) EnsureNew(ctx context.Context, blobs map[digest.Digest][]byte, files map[digest.Digest]string) error {
	return u.ensure(ctx, blobs, files, false)
}

func (u *Uploader) ensure(ctx context.Context, blobs map[digest.Digest][]byte, files map[digest.Digest]string, askBlobs bool) error {
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
		u.c.transfers.bytesRequested.Add(d.Size)
	}
	for d := range blobs {
		claim(d)
	}
	for d := range files {
		claim(d)
	}
	u.mu.Unlock()

	if len(mine) > 0 {
		ask := mine
		var unasked []digest.Digest
		if !askBlobs {
			ask, unasked = nil, nil
			for _, d := range mine {
				if _, ok := blobs[d]; ok {
					unasked = append(unasked, d)
				} else {
					ask = append(ask, d)
				}
			}
		}
		errs := u.uploadMissing(ctx, ask, unasked, blobs, files)
		u.mu.Lock()
		for _, d := range mine {
			e := mineSet[d]
			e.err = errs[d]
			if e.err != nil {
				delete(u.m, d) // let a later action try again
			} else {
				u.m[d] = present // those waiting hold e
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
			if e.err != nil && errors.Is(e.err, context.Canceled) && ctx.Err() == nil {
				// The action uploading it gave up (a race it lost, a
				// group whose members left), not the service: upload
				// what is still missing for this one.
				return u.ensure(ctx, blobs, files, askBlobs)
			}
			if e.err != nil {
				return e.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// uploadMissing uploads those of ds the server lacks, and every one of
// unasked; the error of each digest that could not be made present is in
// the map.
func (u *Uploader) uploadMissing(ctx context.Context, ds, unasked []digest.Digest, blobs map[digest.Digest][]byte, files map[digest.Digest]string) map[digest.Digest]error {
	errs := map[digest.Digest]error{}
	var mu sync.Mutex // guards errs: batches go up concurrently (below)
	fail := func(err error, ds ...digest.Digest) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range ds {
			errs[d] = err
		}
	}
	missing := unasked
	for start := 0; start < len(ds); start += findMissingChunk {
		chunk := ds[start:min(start+findMissingChunk, len(ds))]
		f, err := u.finds.do(ctx, chunk)
		if err == nil {
			err = f.err
		}
		if err != nil {
			fail(fmt.Errorf("FindMissingBlobs: %w", err), chunk...)
			continue
		}
		missing = append(missing, f.missing...)
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Size < missing[j].Size })
	digested := u.digested.Load()
	content := func(d digest.Digest) ([]byte, error) {
		if b, ok := blobs[d]; ok {
			return b, nil
		}
		data, err := plainfile.ReadFile(files[d])
		if err != nil {
			return nil, err
		}
		if digest.OfBytes(data) != d {
			return nil, fmt.Errorf("%s changed while thindist was running", files[d])
		}
		return data, nil
	}
	// pooled is content for a batch: a file is read into a pooled buffer
	// (buf, nil for a blob in memory), given back once its batch call has
	// returned.
	pooled := func(d digest.Digest) (data []byte, buf *[]byte, err error) {
		if b, ok := blobs[d]; ok {
			return b, nil, nil
		}
		// One byte more than the digest's size: a file that grew shows.
		buf = u.c.bufs.get(int(d.Size) + 1)
		n, stamp, err := plainfile.ReadHeadStamped(files[d], *buf)
		if err == nil && (int64(n) != d.Size ||
			!digested.Unchanged(files[d], d, stamp) && digest.OfBytes((*buf)[:n]) != d) {
			err = fmt.Errorf("%s changed while thindist was running", files[d])
		}
		if err != nil {
			u.c.bufs.put(buf)
			return nil, nil, err
		}
		return (*buf)[:n], buf, nil
	}
	// A batch goes while the next is read: an action that imports
	// hundreds of modules (a program's main module, often its longest
	// backend) sends several batches, and one after the other they cost a
	// round trip each before its execution can start.
	inFlight := make(chan struct{}, batchesInFlight)
	var wg sync.WaitGroup
	stream := func(d digest.Digest, content func() ([]byte, error)) {
		wire, err := u.c.streamWrite(ctx, d, content)
		if err != nil {
			fail(fmt.Errorf("uploading %s: %w", d, err), d)
			return
		}
		u.c.transfers.streamWrites.Add(1)
		u.uploaded(ctx, d)
		u.c.transfers.wireBytesUploaded.Add(wire)
	}
	send := func(batch []digest.Digest, batchData [][]byte, batchSize int64, bufs []*[]byte) {
		err, werr := u.updates.do(ctx, blobBatch{ds: batch, data: batchData, size: batchSize})
		if werr != nil {
			err = werr
		}
		if err != nil {
			// The transport sends the blobs from these buffers (codec),
			// and a call that failed or that this action gave up on may
			// not be done with them: they are not reused. A call the
			// server answered OK has had every byte read.
			bufs = nil
		}
		defer func() {
			for _, b := range bufs {
				u.c.bufs.put(b)
			}
		}()
		var rej *batchRejected
		switch {
		case errors.As(err, &rej):
			// The server refused the batch as too large (its message
			// limit is below what it advertised, or it advertised none):
			// send these blobs one by one and smaller batches from now on.
			u.c.lowerBatchLimit(batchSize)
			for i, d := range batch {
				data := batchData[i]
				stream(d, func() ([]byte, error) { return data, nil })
			}
		case err != nil:
			fail(err, batch...)
		default:
			for _, d := range batch {
				u.uploaded(ctx, d)
			}
		}
	}
	var batch []digest.Digest
	var batchData [][]byte
	var batchBufs []*[]byte
	var batchSize int64
	flush := func() {
		if len(batch) == 0 {
			return
		}
		b, data, size, bufs := batch, batchData, batchSize, batchBufs
		batch, batchData, batchSize, batchBufs = nil, nil, 0, nil
		inFlight <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-inFlight; wg.Done() }()
			send(b, data, size, bufs)
		}()
	}
	for _, d := range missing {
		limit := u.c.batchData() // lowered by a refused batch
		if d.Size+perBlobOverhead > limit {
			flush()
			stream(d, func() ([]byte, error) { return content(d) })
			continue
		}
		data, buf, err := pooled(d)
		if err != nil {
			fail(err, d)
			continue
		}
		if batchSize+d.Size+perBlobOverhead > limit {
			flush()
		}
		batch = append(batch, d)
		batchData = append(batchData, data)
		if buf != nil {
			batchBufs = append(batchBufs, buf)
		}
		batchSize += d.Size + perBlobOverhead
	}
	flush()
	wg.Wait()
	return errs
}

// batchesInFlight bounds the batches one action's upload has in flight at
// once: reading the next overlaps sending the last, without one action's
// thousands of imports holding every connection.
const batchesInFlight = 4

// uploaded counts blob d as uploaded, for the run and for the action of
// ctx: the one that claimed it in Ensure, i.e. the first action of the run
// to need it (others needing it at the same time wait and count nothing).
func (u *Uploader) uploaded(ctx context.Context, d digest.Digest) {
	u.c.transfers.blobsUploaded.Add(1)
	u.c.transfers.bytesUploaded.Add(d.Size)
	executor.Sent(ctx, d.Size)
}

// read counts blob d as read, for the run and for the action of ctx.
func (c *Client) read(ctx context.Context, d digest.Digest) {
	c.transfers.bytesRead.Add(d.Size)
	executor.Received(ctx, d.Size)
}

// inlined counts the contents inlined in ar (outputs, stdout, stderr) as
// received, for the run and for the action of ctx.
func (c *Client) inlined(ctx context.Context, ar *repb.ActionResult) {
	n := int64(len(ar.GetStdoutRaw()) + len(ar.GetStderrRaw()))
	for _, f := range ar.GetOutputFiles() {
		n += int64(len(f.GetContents()))
	}
	c.transfers.bytesInlined.Add(n)
	executor.Received(ctx, n)
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
		if c.zstdBatch {
			r.Data = c.enc.EncodeAll(data[i], nil)
			r.Compressor = repb.Compressor_ZSTD
		}
		wire += int64(len(r.Data))
		req.Requests = append(req.Requests, r)
	}
	err := c.retry(ctx, func(ctx context.Context) error {
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
	err = c.retry(ctx, func(ctx context.Context) error {
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

// ReadBytes reads blob d and verifies it. A corrupt read is tried again,
// within the same MaxAttempts bound as transient errors.
func (c *Client) ReadBytes(ctx context.Context, d digest.Digest) ([]byte, error) {
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
	c.read(ctx, d)
	return data, nil
}

// readOne reads blob d, unverified, in a batch of its own when it fits and
// with ByteStream otherwise or when the server refuses the batch.
func (c *Client) readOne(ctx context.Context, d digest.Digest) ([]byte, error) {
	if d.Size+perBlobOverhead > c.batchData() {
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
// wrapping errNotFound.
func (c *Client) ReadBlobs(ctx context.Context, ds []digest.Digest) (map[digest.Digest][]byte, error) {
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
			c.read(ctx, d)
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
		case d.Size+perBlobOverhead > limit:
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
		data, err := c.ReadBytes(ctx, d)
		if err != nil {
			return nil, err
		}
		out[d] = data
	}
	return out, nil
}

// ReadFile reads blob d into the file dst (created or replaced) and
// verifies it.
func (c *Client) ReadFile(ctx context.Context, d digest.Digest, dst string) error {
	data, err := c.ReadBytes(ctx, d)
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
	for _, d := range ds {
		req.Digests = append(req.Digests, d.Proto())
	}
	if c.zstdRead {
		req.AcceptableCompressors = []repb.Compressor_Value{repb.Compressor_ZSTD}
	}
	resp, err := c.cas.BatchReadBlobs(ctx, req)
	if tooLarge(err) {
		return nil, nil, &batchRejected{err}
	}
	if err != nil {
		return nil, nil, err
	}
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

func (c *Client) streamRead(ctx context.Context, d digest.Digest) ([]byte, error) {
	stream, err := c.bs.Read(ctx, &bytestream.ReadRequest{ResourceName: c.resource("", d, c.zstdRead)})
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
		data, err := c.dec.DecodeAll(buf.Bytes(), make([]byte, 0, d.Size))
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
func (c *Client) batchData() int64 {
	l := c.batchLimit.Load()
	return l - min(4096, l/16)
}
