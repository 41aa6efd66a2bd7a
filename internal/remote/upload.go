package remote

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

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
// its own channel per digest, which a link of thousands of modules would
// keep live to its end. It is never changed.
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
// path) present in the CAS. What this call uploads counts in m.
func (u *Uploader) Ensure(ctx context.Context, m Meter, blobs map[digest.Digest][]byte, files map[digest.Digest]string) error {
	return u.ensure(ctx, m, blobs, files, true)
}

// EnsureNew is Ensure for blobs made for an action that the caches have
// just missed (its Action, Command, Directory messages and index shard):
// those are sent without asking FindMissingBlobs first, a round trip less
// before the action's Execute. Only the files are asked about. A blob the
// service had after all costs its bytes again, a few KiB.
func (u *Uploader) EnsureNew(ctx context.Context, m Meter, blobs map[digest.Digest][]byte, files map[digest.Digest]string) error {
	return u.ensure(ctx, m, blobs, files, false)
}

func (u *Uploader) ensure(ctx context.Context, m Meter, blobs map[digest.Digest][]byte, files map[digest.Digest]string, askBlobs bool) error {
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
		errs := u.uploadMissing(ctx, m, ask, unasked, blobs, files)
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
				return u.ensure(ctx, m, blobs, files, askBlobs)
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
func (u *Uploader) uploadMissing(ctx context.Context, m Meter, ds, unasked []digest.Digest, blobs map[digest.Digest][]byte, files map[digest.Digest]string) map[digest.Digest]error {
	up := &uploading{ctx: ctx, m: m, u: u, blobs: blobs, files: files, digested: u.digested.Load(),
		errs: map[digest.Digest]error{}, inFlight: make(chan struct{}, batchesInFlight)}
	missing := up.findMissing(ds, unasked)
	sort.Slice(missing, func(i, j int) bool { return missing[i].Size < missing[j].Size })
	for _, d := range missing {
		limit := u.c.batchData() // lowered by a refused batch
		if d.Size+perBlobOverhead > limit || u.c.streamedUp(d) {
			up.flush()
			up.stream(d, func() ([]byte, error) { return up.content(d) })
			continue
		}
		data, buf, err := up.pooled(d)
		if err != nil {
			up.fail(err, d)
			continue
		}
		if up.next.size+d.Size+perBlobOverhead > limit {
			up.flush()
		}
		up.next.add(d, data, buf)
	}
	up.flush()
	up.wg.Wait()
	return up.errs
}

// uploading is one uploadMissing: what it uploads from (blobs in memory,
// files), the batch it fills, the batches in flight, and the errors.
type uploading struct {
	ctx      context.Context
	m        Meter // the action's, which the uploads count in
	u        *Uploader
	blobs    map[digest.Digest][]byte
	files    map[digest.Digest]string
	digested *digest.Files

	mu   sync.Mutex // guards errs: batches go up concurrently
	errs map[digest.Digest]error

	// A batch goes while the next is read: an action that imports
	// hundreds of modules (a program's main module, often its longest
	// backend) sends several batches, and one after the other they cost a
	// round trip each before its execution can start.
	inFlight chan struct{}
	wg       sync.WaitGroup
	next     pendingBatch // the batch being filled
}

// pendingBatch is a batch being filled: its blobs, their contents, the
// pooled buffers those were read into, and its size with overheads.
type pendingBatch struct {
	ds   []digest.Digest
	data [][]byte
	bufs []*[]byte
	size int64
}

// add puts blob d, whose content is data (read into buf, nil for a blob in
// memory), in the batch.
func (b *pendingBatch) add(d digest.Digest, data []byte, buf *[]byte) {
	b.ds = append(b.ds, d)
	b.data = append(b.data, data)
	if buf != nil {
		b.bufs = append(b.bufs, buf)
	}
	b.size += d.Size + perBlobOverhead
}

// fail records err for ds.
func (up *uploading) fail(err error, ds ...digest.Digest) {
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, d := range ds {
		up.errs[d] = err
	}
}

// findMissing asks which of ds the server lacks, in chunks, and returns
// them after unasked.
func (up *uploading) findMissing(ds, unasked []digest.Digest) []digest.Digest {
	missing := unasked
	for start := 0; start < len(ds); start += findMissingChunk {
		chunk := ds[start:min(start+findMissingChunk, len(ds))]
		f, err := up.u.finds.do(up.ctx, chunk)
		if err == nil {
			err = f.err
		}
		if err != nil {
			up.fail(fmt.Errorf("FindMissingBlobs: %w", err), chunk...)
			continue
		}
		missing = append(missing, f.missing...)
	}
	return missing
}

// content is blob d's content, for a stream: from memory, or read from
// its file and checked against d.
func (up *uploading) content(d digest.Digest) ([]byte, error) {
	if b, ok := up.blobs[d]; ok {
		return b, nil
	}
	data, err := plainfile.ReadFile(up.files[d])
	if err != nil {
		return nil, err
	}
	if digest.OfBytes(data) != d {
		return nil, fmt.Errorf("%s changed while thindist was running", up.files[d])
	}
	return data, nil
}

// pooled is blob d's content for a batch: a file is read into a pooled
// buffer (buf, nil for a blob in memory), given back once its batch call
// has returned.
func (up *uploading) pooled(d digest.Digest) (data []byte, buf *[]byte, err error) {
	if b, ok := up.blobs[d]; ok {
		return b, nil, nil
	}
	bufs, path := &up.u.c.bufs, up.files[d]
	// One byte more than the digest's size: a file that grew shows.
	buf = bufs.get(int(d.Size) + 1)
	n, stamp, err := plainfile.ReadHeadStamped(path, *buf)
	if err == nil && (int64(n) != d.Size ||
		!up.digested.Unchanged(path, d, stamp) && digest.OfBytes((*buf)[:n]) != d) {
		err = fmt.Errorf("%s changed while thindist was running", path)
	}
	if err != nil {
		bufs.put(buf)
		return nil, nil, err
	}
	return (*buf)[:n], buf, nil
}

// stream uploads blob d alone, through ByteStream.
func (up *uploading) stream(d digest.Digest, content func() ([]byte, error)) {
	c := up.u.c
	wire, err := c.streamWrite(up.ctx, d, content)
	if err != nil {
		up.fail(fmt.Errorf("uploading %s: %w", d, err), d)
		return
	}
	c.transfers.streamWrites.Add(1)
	up.u.uploaded(up.m, d)
	c.transfers.wireBytesUploaded.Add(wire)
}

// flush sends the batch being filled, if any, in the background, once
// fewer than batchesInFlight are.
func (up *uploading) flush() {
	if len(up.next.ds) == 0 {
		return
	}
	b := up.next
	up.next = pendingBatch{}
	up.inFlight <- struct{}{}
	up.wg.Add(1)
	go func() {
		defer func() { <-up.inFlight; up.wg.Done() }()
		up.send(b)
	}()
}

// send uploads batch b.
func (up *uploading) send(b pendingBatch) {
	c := up.u.c
	err, werr := up.u.updates.do(up.ctx, blobBatch{ds: b.ds, data: b.data, size: b.size})
	if werr != nil {
		err = werr
	}
	bufs := b.bufs
	if err != nil {
		// The transport sends the blobs from these buffers (codec),
		// and a call that failed or that this action gave up on may
		// not be done with them: they are not reused. A call the
		// server answered OK has had every byte read.
		bufs = nil
	}
	defer func() {
		for _, buf := range bufs {
			c.bufs.put(buf)
		}
	}()
	var rej *batchRejected
	switch {
	case errors.As(err, &rej):
		// The server refused the batch as too large (its message
		// limit is below what it advertised, or it advertised none):
		// send these blobs one by one and smaller batches from now on.
		c.lowerBatchLimit(b.size)
		for i, d := range b.ds {
			data := b.data[i]
			up.stream(d, func() ([]byte, error) { return data, nil })
		}
	case err != nil:
		up.fail(err, b.ds...)
	default:
		for _, d := range b.ds {
			up.u.uploaded(up.m, d)
		}
	}
}

// batchesInFlight bounds the batches one action's upload has in flight at
// once: reading the next overlaps sending the last, without one action's
// thousands of imports holding every connection.
const batchesInFlight = 4
