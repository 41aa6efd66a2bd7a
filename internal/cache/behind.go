package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/sys/digest"
)

// BulkWriter is a Store that writes many blobs in one go: a remote store
// asks which of them the service lacks in one FindMissingBlobs (if ask)
// and sends them in batches, where blob by blob each costs its own calls.
type BulkWriter interface {
	WriteBlobsBytes(ctx context.Context, m Meter, blobs map[digest.Digest][]byte, ask bool) error
}

// KnownBlobs is a Store that knows some of the blobs it holds without
// asking (a remote one: those its run uploaded, found or read there).
type KnownBlobs interface {
	HasBlob(d digest.Digest) bool
}

// WriteBehindOptions configures NewWriteBehind.
type WriteBehindOptions struct {
	// Window is how long a result waits for others to go with it.
	Window time.Duration
	// BurstBytes sends a burst at once when its blobs reach this size.
	BurstBytes int64
	// MaxPending bounds the bytes held in memory: a blob that would take
	// them over it, or is larger than BurstBytes, is written at once, by
	// the caller, as the store underneath writes it.
	MaxPending int64
	// Warn reports results that could not be stored.
	Warn func(format string, args ...any)
}

// WriteBehindStats are what a WriteBehind stored.
type WriteBehindStats struct {
	Results, Bursts int64
	// Failed results were not stored (a blob or the entry refused).
	Failed int64
}

// WriteBehind is a Store decorator that stores results while the run goes
// on instead of before their actions end, and stores them together: the
// blobs of the results of a burst (those that end within Window) are
// written in one go (BulkWriter), then their entries are sent at once. On
// a remote cache a result this machine compiled cost a lookup of its
// object, an upload and an entry of its own, and when this machine
// compiles most of a link (a narrow cluster), storing them one by one was
// a large part of thindist's CPU and of the server's (see docs/design.md,
// "Results stored behind").
//
// Reads pass through to the store underneath. Writes return at once (a
// blob written by file is read first, as its path may not outlast the
// action); what fails is reported through Warn, and an entry whose blob
// could not be written is not stored. Close sends what is left.
type WriteBehind struct {
	Store
	opts WriteBehindOptions
	ctx  context.Context

	mu      sync.Mutex
	cur     *burst                   // gathering; nil until a write comes
	writing map[digest.Digest]*burst // blobs handed over and not yet written
	failed  map[digest.Digest]bool   // blobs that could not be written
	handed  map[digest.Digest]bool   // blobs handed over, ever
	held    int64                    // bytes of the blobs not yet written
	closed  bool
	sending sync.WaitGroup // bursts sent

	results, bursts, failures atomic.Int64
}

// burst is the results gathered in one window.
type burst struct {
	blobs   map[digest.Digest][]byte
	bytes   int64
	entries []pendingEntry
	timer   *time.Timer
	// written is closed once the blobs are written or have failed.
	written chan struct{}
}

type pendingEntry struct {
	key digest.Digest
	res *repb.ActionResult
}

// NewWriteBehind returns the decorator. Its writes use ctx: once it ends,
// nothing more is stored.
func NewWriteBehind(ctx context.Context, store Store, opts WriteBehindOptions) *WriteBehind {
	if opts.Warn == nil {
		opts.Warn = func(string, ...any) {}
	}
	return &WriteBehind{Store: store, opts: opts, ctx: ctx,
		writing: map[digest.Digest]*burst{}, failed: map[digest.Digest]bool{}, handed: map[digest.Digest]bool{}}
}

// Stats returns what w has stored so far.
func (w *WriteBehind) Stats() WriteBehindStats {
	return WriteBehindStats{Results: w.results.Load(), Bursts: w.bursts.Load(), Failed: w.failures.Load()}
}

// WriteBlob implements Store: src is read now, and written with the burst.
func (w *WriteBehind) WriteBlob(ctx context.Context, m Meter, d digest.Digest, src string) error {
	if w.has(d) {
		return nil
	}
	if !w.fits(d.Size) {
		return w.Store.WriteBlob(ctx, m, d, src)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if int64(len(data)) != d.Size {
		return fmt.Errorf("%s: %d bytes, not the %d of its digest", src, len(data), d.Size)
	}
	return w.WriteBlobBytes(ctx, m, d, data)
}

// WriteBlobBytes implements Store.
func (w *WriteBehind) WriteBlobBytes(ctx context.Context, m Meter, d digest.Digest, data []byte) error {
	if w.has(d) {
		return nil
	}
	if !w.fits(d.Size) {
		return w.Store.WriteBlobBytes(ctx, m, d, data)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handed[d] {
		return nil // in a burst already: its entry waits for it there
	}
	// Counted as sent for the action whose result it is now, when its
	// result's figures are taken (executor.Metered): the burst is no one
	// action's, and writes with no meter. The store's own totals count
	// what went, lower if it had the blob after all.
	if m != nil {
		m.Sent(d.Size)
	}
	w.handed[d] = true
	b := w.gathering()
	b.blobs[d] = data
	b.bytes += d.Size
	w.held += d.Size
	w.writing[d] = b
	if b.bytes >= w.opts.BurstBytes {
		w.sendLocked(true)
	}
	return nil
}

// UpdateActionResult implements Store: res is stored once the blobs it
// names are written.
func (w *WriteBehind) UpdateActionResult(_ context.Context, key digest.Digest, res *repb.ActionResult) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("the cache's writer is closed")
	}
	b := w.gathering()
	b.entries = append(b.entries, pendingEntry{key, res})
	return nil
}

// has reports whether the store underneath is known to hold d: nothing
// to write.
func (w *WriteBehind) has(d digest.Digest) bool {
	k, ok := w.Store.(KnownBlobs)
	return ok && k.HasBlob(d)
}

// fits reports whether a blob of n bytes may wait in memory.
func (w *WriteBehind) fits(n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed && n <= w.opts.BurstBytes && w.held+n <= w.opts.MaxPending
}

// gathering is the burst being gathered, begun (with its window) if none
// is. w.mu is held.
func (w *WriteBehind) gathering() *burst {
	if w.cur == nil {
		b := &burst{blobs: map[digest.Digest][]byte{}, written: make(chan struct{})}
		b.timer = time.AfterFunc(w.opts.Window, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.cur == b {
				w.sendLocked(true)
			}
		})
		w.cur = b
	}
	return w.cur
}

// sendLocked sends the burst being gathered. ask says whether its blobs
// are looked up first: a round trip that saves sending what the store has,
// worth it while the run goes on, not at its end. w.mu is held.
func (w *WriteBehind) sendLocked(ask bool) {
	b := w.cur
	if b == nil {
		return
	}
	w.cur = nil
	b.timer.Stop()
	w.bursts.Add(1)
	w.sending.Add(1)
	go func() {
		defer w.sending.Done()
		w.send(b, ask)
	}()
}

// send writes b's blobs, then stores each entry once every blob it names
// is written, in this burst or an earlier one.
func (w *WriteBehind) send(b *burst, ask bool) {
	err := w.writeBlobs(b.blobs, ask)
	if err != nil && w.ctx.Err() == nil && !errors.Is(err, ErrUnavailable) {
		w.opts.Warn("could not store %d blobs in the cache, nor the results that name them (the link is unaffected; "+
			"other links will compile those actions again): %v", len(b.blobs), err)
	}
	w.mu.Lock()
	w.held -= b.bytes
	for d := range b.blobs {
		if err != nil {
			w.failed[d] = true
		}
		delete(w.writing, d)
	}
	w.mu.Unlock()
	close(b.written)

	var wg sync.WaitGroup
	sem := make(chan struct{}, entriesAtOnce)
	for _, e := range b.entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !w.blobsWritten(e.key, e.res) {
				w.failures.Add(1)
				return
			}
			if err := w.Store.UpdateActionResult(w.ctx, e.key, e.res); err != nil {
				w.failures.Add(1)
				if w.ctx.Err() == nil && !errors.Is(err, ErrUnavailable) {
					w.opts.Warn("could not store the result of action %s in the cache (the link is unaffected): %v", e.key, err)
				}
				return
			}
			w.results.Add(1)
		}()
	}
	wg.Wait()
}

// entriesAtOnce bounds the entries of a burst in flight together: a
// service takes about 100 concurrent calls on a connection before it makes
// the others wait.
const entriesAtOnce = 64

func (w *WriteBehind) writeBlobs(blobs map[digest.Digest][]byte, ask bool) error {
	if len(blobs) == 0 {
		return nil
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if b, ok := w.Store.(BulkWriter); ok {
		return b.WriteBlobsBytes(w.ctx, nil, blobs, ask)
	}
	for d, data := range blobs {
		if err := w.Store.WriteBlobBytes(w.ctx, nil, d, data); err != nil {
			return err
		}
	}
	return nil
}

// blobsWritten waits until the blobs of the entry of res under key that
// were handed over are written (in whichever bursts they went), and
// reports whether they all were.
func (w *WriteBehind) blobsWritten(key digest.Digest, res *repb.ActionResult) bool {
	// The key is the digest of the Action, which the store may have been
	// given first too (Options.StoreMessages).
	ds := []*repb.Digest{key.Proto(), res.GetStdoutDigest(), res.GetStderrDigest()}
	for _, f := range res.GetOutputFiles() {
		ds = append(ds, f.GetDigest())
	}
	for _, p := range ds {
		d, err := digest.FromProto(p)
		if err != nil {
			continue
		}
		w.mu.Lock()
		b := w.writing[d]
		w.mu.Unlock()
		if b != nil {
			<-b.written
		}
		w.mu.Lock()
		failed := w.failed[d]
		w.mu.Unlock()
		if failed {
			return false
		}
	}
	return w.ctx.Err() == nil
}

// Close sends what is left, without looking its blobs up first (the link
// waits for it), and waits for every burst. Once the context has ended it
// sends nothing.
func (w *WriteBehind) Close() {
	w.mu.Lock()
	w.closed = true
	if w.ctx.Err() == nil {
		w.sendLocked(false)
	} else if w.cur != nil {
		w.cur.timer.Stop()
		w.cur = nil
	}
	w.mu.Unlock()
	w.sending.Wait()
}
