package remote

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/thindist/thindist/internal/sys/digest"
)

// CompressAuto compresses each direction, per blob size class, when
// compressing is faster than sending: zstd's speed on this machine
// against the throughput measured on the link (autoCompress). Until the
// service's link has been measured (its first link, with no Recall) it
// does as CompressDownloads.
const CompressAuto = CompressNone + 1

// Measured is what a link measured: its throughput each way, to be
// remembered per service, and this machine's zstd, per machine. The run
// hands what earlier links measured to the client (Client.Recall) and
// keeps what this one did (Client.Measured).
type Measured struct {
	Up   Rate       `json:"up"`
	Down Rate       `json:"down"`
	Zstd *ZstdSpeed `json:"zstd,omitempty"`
}

// ZstdSpeed is zstd's speed on a machine (Host), per size class of blob
// that auto compression decides for.
type ZstdSpeed struct {
	Host  string    `json:"host"`
	Small ZstdClass `json:"small"` // blobs of smallBlob up to largeBlob
	Large ZstdClass `json:"large"` // blobs of largeBlob and more
}

// ZstdClass is zstd's speed on one core and what it saves, on a sample.
type ZstdClass struct {
	Compress   float64 `json:"compress"`   // bytes (uncompressed) per second
	Decompress float64 `json:"decompress"` // bytes (uncompressed) per second
	Saved      float64 `json:"saved"`      // share of the bytes compression saves
}

// The size classes of blobs auto compression decides for. A tiny blob
// (under smallBlob) goes as it is: it travels in a batch call, whose time
// is its round trip and per-request cost, not its bytes.
const (
	smallBlob = 64 << 10
	largeBlob = 1 << 20
)

type sizeClass int

const (
	tinyClass sizeClass = iota
	smallClass
	largeClass
)

func classOf(size int64) sizeClass {
	switch {
	case size < smallBlob:
		return tinyClass
	case size < largeBlob:
		return smallClass
	}
	return largeClass
}

func (z *ZstdSpeed) class(c sizeClass) ZstdClass {
	if c == largeClass {
		return z.Large
	}
	return z.Small
}

// direction is a transfer's: to the service or from it.
type direction int

const (
	up direction = iota
	down
)

func (d direction) String() string {
	if d == up {
		return "up"
	}
	return "down"
}

// worthIt reports whether compressing is faster than sending as it is
// over a link of bw bytes/s, at speed bytes/s of zstd (compressing for an
// upload, decompressing for a download) that saves saved of the bytes:
// a blob of S bytes takes S/bw as it is and S/speed + (1-saved)·S/bw
// compressed, so compressing wins when speed·saved > bw. The CPU it
// takes is this machine's, which lld, thindist and the local compiles
// want too, so it must save cpuMargin times the time it costs.
func worthIt(bw, speed, saved float64) bool { return bw > 0 && speed*saved > cpuMargin*bw }

// cpuMargin is how many times its CPU time compressing must save in wire
// time.
const cpuMargin = 2

// link measures the client's transfers each way (throughput) and, with
// CompressAuto, decides per blob whether it goes compressed. For the
// other settings compress always says yes: the client's zstd flags alone
// (the setting and what the server offers) decide. A nil link is an
// explicit setting that measures nothing.
type link struct {
	auto     bool
	up, down *throughput
	host     string

	mu       sync.Mutex
	recalled Measured

	zstd     atomic.Pointer[ZstdSpeed]
	sampling atomic.Bool
	// packed holds the blobs whose uploads go compressed whatever auto
	// decides for their size (packUploads).
	packed sync.Map // digest.Digest → struct{}
	// sent counts blobs per direction sent compressed ([d][1]) or not
	// ([d][0]) under auto.
	sent [2][2]atomic.Int64
}

func newLink(auto bool, rtt time.Duration, now func() time.Time) *link {
	host, _ := os.Hostname()
	return &link{auto: auto, up: newThroughput(rtt, now), down: newThroughput(rtt, now), host: host}
}

func (l *link) meter(d direction) *throughput {
	if l == nil {
		return nil
	}
	if d == up {
		return l.up
	}
	return l.down
}

// recall takes what earlier links measured; a zstd speed measured on
// another host is not this machine's and is left out.
func (l *link) recall(m Measured) {
	if l == nil {
		return
	}
	if m.Zstd != nil && m.Zstd.Host == l.host {
		l.zstd.CompareAndSwap(nil, m.Zstd)
	}
	m.Zstd = nil
	l.mu.Lock()
	l.recalled = m
	l.mu.Unlock()
}

// measured is what to remember of this link: each direction's throughput
// if it measured enough to be known, else what was recalled of it.
func (l *link) measured() Measured {
	if l == nil {
		return Measured{}
	}
	l.mu.Lock()
	m := l.recalled
	l.mu.Unlock()
	if r := l.up.rate(); r.known() {
		m.Up = r
	}
	if r := l.down.rate(); r.known() {
		m.Down = r
	}
	m.Zstd = l.zstd.Load()
	return m
}

// rate is the throughput known in direction d: this link's if it has
// measured enough (live), else what an earlier link measured.
func (l *link) rate(d direction) (r Rate, live bool) {
	if r := l.meter(d).rate(); r.known() {
		return r, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d == up {
		return l.recalled.Up, false
	}
	return l.recalled.Down, false
}

// upRate is the upload throughput known, bytes/s; 0 if none is.
func (l *link) upRate() float64 {
	if l == nil {
		return 0
	}
	if r, _ := l.rate(up); r.known() {
		return r.BytesPerSec
	}
	return 0
}

// A choice is auto compression's decision for a direction and size
// class, and what it went by.
type choice struct {
	zstd bool
	// bw is the throughput it went by, live if measured on this link
	// (else recalled); none if unknown.
	bw   Rate
	live bool
	// z is zstd's speed here for the class, nil if not measured yet.
	z *ZstdClass
}

// choose decides for blobs of class c going in direction d: compressed
// if worthIt by the throughput known and zstd's speed here; with either
// unknown, the safe choice (CompressDownloads': downloads compressed,
// uploads not).
func (l *link) choose(d direction, c sizeClass) choice {
	var ch choice
	ch.bw, ch.live = l.rate(d)
	if z := l.zstd.Load(); z != nil {
		zc := z.class(c)
		ch.z = &zc
	}
	if !ch.bw.known() || ch.z == nil {
		ch.zstd = d == down
		return ch
	}
	speed := ch.z.Compress
	if d == down {
		speed = ch.z.Decompress
	}
	ch.zstd = worthIt(ch.bw.BytesPerSec, speed, ch.z.Saved)
	return ch
}

// compress reports whether a blob of size bytes goes compressed in
// direction d, where the server takes it so: under auto, tiny blobs never
// and the others as choose says; otherwise yes. Under auto it counts the
// decision for the report.
func (l *link) compress(d direction, size int64) bool {
	z := l.wants(d, size)
	if l != nil && l.auto {
		if z {
			l.sent[d][1].Add(1)
		} else {
			l.sent[d][0].Add(1)
		}
	}
	return z
}

// wants is compress without counting.
func (l *link) wants(d direction, size int64) bool {
	if l == nil || !l.auto {
		return true
	}
	c := classOf(size)
	return c != tinyClass && l.choose(d, c).zstd
}

// packUploads makes the uploads of ds go compressed under auto whatever
// the link's throughput and zstd's speed here, as with CompressAll: blobs
// sent once per CAS rather than once per link (the shipped toolchain,
// hundreds of MB that zstd shrinks about threefold), whose bytes on the
// wire and in the server's storage outweigh the CPU of compressing them
// once, and which are sent before auto has measured anything.
func (l *link) packUploads(ds map[digest.Digest]string) {
	if l == nil || !l.auto {
		return
	}
	for d := range ds {
		l.packed.Store(d, struct{}{})
	}
}

// compressUp reports whether an upload of blob b goes compressed, where
// the server takes it so: a packed blob always, the others as compress
// says.
func (l *link) compressUp(b digest.Digest) bool {
	if l.isPacked(b) {
		l.sent[up][1].Add(1)
		return true
	}
	return l.compress(up, b.Size)
}

// wantsUp is compressUp without counting.
func (l *link) wantsUp(b digest.Digest) bool { return l.isPacked(b) || l.wants(up, b.Size) }

func (l *link) isPacked(b digest.Digest) bool {
	if l == nil || !l.auto {
		return false
	}
	_, ok := l.packed.Load(b)
	return ok
}

// sample measures zstd's speed on this machine on data, a blob about to
// be uploaded, unless it is known already (measured by this link, or an
// earlier one on this host) or data is too small to time: once per link,
// a few milliseconds of one core.
func (l *link) sample(enc *zstd.Encoder, dec *zstd.Decoder, data []byte) {
	if l == nil || !l.auto || len(data) < measuredMin || l.zstd.Load() != nil || !l.sampling.CompareAndSwap(false, true) {
		return
	}
	l.zstd.CompareAndSwap(nil, &ZstdSpeed{
		Host:  l.host,
		Small: measureZstd(enc, dec, data[:smallBlob]),
		Large: measureZstd(enc, dec, data[:min(len(data), largeBlob)]),
	})
}

// measureZstd times enc and dec on data, the fastest of a few tries (the
// machine is busy with other work).
func measureZstd(enc *zstd.Encoder, dec *zstd.Decoder, data []byte) ZstdClass {
	const tries = 3
	var packed []byte
	var ct, dt time.Duration
	for i := range tries {
		start := time.Now()
		packed = enc.EncodeAll(data, packed[:0])
		if t := time.Since(start); i == 0 || t < ct {
			ct = t
		}
	}
	buf := make([]byte, 0, len(data))
	for i := range tries {
		start := time.Now()
		out, err := dec.DecodeAll(packed, buf[:0])
		if err != nil || len(out) != len(data) {
			return ZstdClass{} // not worth it: never compresses
		}
		if t := time.Since(start); i == 0 || t < dt {
			dt = t
		}
	}
	n := float64(len(data))
	return ZstdClass{
		Compress:   n / max(ct.Seconds(), 1e-9),
		Decompress: n / max(dt.Seconds(), 1e-9),
		Saved:      1 - float64(len(packed))/n,
	}
}

// describe says what auto compression chose for each direction as of
// now, and why, for the run's record and its report; "" for an explicit
// setting.
func (l *link) describe() string {
	if l == nil || !l.auto {
		return ""
	}
	return "auto: " + l.describeDir(up) + "; " + l.describeDir(down)
}

func (l *link) describeDir(d direction) string {
	what := map[direction]string{up: "uploads", down: "downloads"}[d]
	small, large := l.choose(d, smallClass), l.choose(d, largeClass)
	var s string
	switch {
	case small.zstd && large.zstd:
		s = what + " of 64 KiB or more compressed"
	case !small.zstd && !large.zstd:
		s = what + " not compressed"
	case large.zstd:
		s = what + " of 1 MiB or more compressed, smaller ones not"
	default:
		s = what + " of 64 KiB to 1 MiB compressed, larger ones not"
	}
	if n, z := l.sent[d][0].Load(), l.sent[d][1].Load(); n+z > 0 {
		s += fmt.Sprintf(" (%d of %d transfers)", z, n+z)
	}
	switch ch := large; {
	case !ch.bw.known():
		s += fmt.Sprintf(": no throughput %s measured for this service yet, so the safe choice", d)
	case ch.z == nil:
		s += fmt.Sprintf(": measured %s %s, zstd's speed here not measured yet, so the safe choice", mbps(ch.bw.BytesPerSec), d)
	default:
		by := "by this link"
		if !ch.live {
			by = "by an earlier link"
		}
		verb, speed := "compresses", ch.z.Compress
		if d == down {
			verb, speed = "decompresses", ch.z.Decompress
		}
		s += fmt.Sprintf(": measured %s %s %s, zstd %s %s here saving %.0f%%",
			mbps(ch.bw.BytesPerSec), d, by, verb, mbps(speed), 100*ch.z.Saved)
	}
	return s
}

func mbps(bytesPerSec float64) string { return fmt.Sprintf("%.1f MB/s", bytesPerSec/1e6) }

// Recall gives the client what earlier links measured (Measured), for
// CompressAuto to decide by until this link has measured its own.
func (c *Client) Recall(m Measured) { c.link.recall(m) }

// Measured is what this link measured, to be remembered for the next
// (with what was recalled of what it did not measure enough of).
func (c *Client) Measured() Measured { return c.link.measured() }

// CompressionChoice says, with --remote-compress=auto, what was chosen
// for each direction and why; "" for an explicit setting.
func (c *Client) CompressionChoice() string { return c.link.describe() }

// zstdUp reports whether an upload of blob d is compressed, by
// ByteStream (batch false) or in a batch call.
func (c *Client) zstdUp(d digest.Digest, batch bool) bool {
	ok := c.zstdUpload
	if batch {
		ok = c.zstdBatch
	}
	return ok && c.link.compressUp(d)
}

// streamedUp and streamedDown report whether blob d goes by ByteStream,
// up or down, although it fits in a batch: it is to travel compressed, and
// the server names no batch compressors, so that it takes and sends
// compressed blobs only over ByteStream (Buildbarn; its BatchReadBlobs
// ignores acceptable_compressors too). Tiny blobs stay in batches: a call
// of their own would cost more than compressing them saves.
func (c *Client) streamedUp(d digest.Digest) bool {
	return c.zstdUpload && c.batchesRaw(d) && c.link.wantsUp(d)
}

func (c *Client) streamedDown(d digest.Digest) bool {
	return c.zstdRead && c.batchesRaw(d) && c.link.wants(down, d.Size)
}

func (c *Client) batchesRaw(d digest.Digest) bool {
	return !c.zstdBatch && classOf(d.Size) != tinyClass
}

// zstdDown reports whether a read of a blob of size bytes (the largest of
// a batch) asks for it compressed.
func (c *Client) zstdDown(size int64) bool { return c.zstdRead && c.link.compress(down, size) }

// PackUploads makes the uploads of the files ds go compressed wherever
// the server takes compressed uploads and the setting is auto or all
// (under auto, whatever it would decide): for blobs stored once per CAS,
// the shipped toolchain.
func (c *Client) PackUploads(ds map[digest.Digest]string) { c.link.packUploads(ds) }
