package remote

import (
	"math/bits"
	"sync"
)

// readBufs holds the buffers that input files are read into for batch
// uploads, by power-of-two capacity from 4 KiB to 4 MiB (grpcMax, the
// largest blob a batch holds). The transport sends the blobs from these
// buffers (codec): one goes back once the server has answered its batch
// call OK, and is dropped after a failed one. Reading each file into new
// memory costs more than the read itself on big links, which upload tens
// of megabytes of bitcode: fresh memory is zeroed and faulted in page by
// page.
type readBufs struct {
	tiers [readBufTiers]sync.Pool
}

const (
	readBufMinShift = 12 // 4 KiB
	readBufTiers    = 11 // up to 4 MiB
)

// tier is the tier whose buffers hold n bytes, or -1 for none.
func readBufTier(n int) int {
	if n <= 1<<readBufMinShift {
		return 0
	}
	t := bits.Len(uint(n-1)) - readBufMinShift
	if t >= readBufTiers {
		return -1
	}
	return t
}

// get returns a buffer of length n.
func (p *readBufs) get(n int) *[]byte {
	t := readBufTier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(readBufMinShift+t))
	return &b
}

// put returns b for reuse; nothing may use it afterwards.
func (p *readBufs) put(b *[]byte) {
	c := cap(*b)
	if t := readBufTier(c); t >= 0 && c == 1<<(readBufMinShift+t) {
		p.tiers[t].Put(b)
	}
}
