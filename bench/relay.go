package main

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// relay stands for the network between thindist and a cluster behind an
// office uplink: a TCP relay on loopback that forwards each connection to
// a backend (the simulation server, or a real Buildbarn's frontend),
// holding every byte delay each way (half the round trip) and letting
// bytesPerSec through in each direction, shared by all connections (a
// token bucket per direction, as one uplink carries them all). The
// backend may change between links (setBackend) while the relay's own
// address stays, so that thindist sees the same service from link to
// link (its notes of a service are by address).
type relay struct {
	ln       net.Listener
	delay    time.Duration
	up, down *bucket
	backend  atomic.Value // string
	wg       sync.WaitGroup
}

// relayChunk is the most one read forwards at once.
const relayChunk = 16 << 10

// startRelay listens on loopback for a relay of rtt (split evenly between
// the directions) and bitsPerSec each way (0: unlimited).
func startRelay(rtt time.Duration, bitsPerSec float64) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, delay: rtt / 2, up: newBucket(bitsPerSec / 8), down: newBucket(bitsPerSec / 8)}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the relay's address, to give thindist as its --remote.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// setBackend makes new connections go to addr.
func (r *relay) setBackend(addr string) { r.backend.Store(addr) }

// moved is how many bytes the relay has forwarded each way so far: up, to
// the backend, and down, to thindist (what went over the wire, gRPC's
// framing included).
func (r *relay) moved() (up, down int64) { return r.up.moved.Load(), r.down.moved.Load() }

// Close stops accepting; connections end with their ends.
func (r *relay) Close() {
	r.ln.Close()
	r.wg.Wait()
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		addr, _ := r.backend.Load().(string)
		b, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			continue
		}
		var both sync.WaitGroup
		both.Add(2)
		for _, p := range [][2]net.Conn{{c, b}, {b, c}} {
			bk := r.up
			if p[0] == b {
				bk = r.down
			}
			go func() { defer both.Done(); r.pipe(p[0], p[1], bk) }()
		}
		go func() { both.Wait(); c.Close(); b.Close() }()
	}
}

// pipe copies from src to dst through bucket and the delay line, then
// closes dst's writing side; the connection is closed once both
// directions are done.
func (r *relay) pipe(src, dst net.Conn, b *bucket) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	// The delay line holds what is in flight: at most delay × rate bytes,
	// plus the reads waiting for it.
	line := make(chan chunk, 4096)
	go func() {
		defer close(line)
		for {
			buf := make([]byte, relayChunk)
			n, err := src.Read(buf)
			if n > 0 {
				b.take(n)
				line <- chunk{data: buf[:n], due: time.Now().Add(r.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range line {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	for range line { // drain after a failed write, so the reader ends
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// bucket lets rate bytes per second through (0: unlimited), to every
// taker in turn: each take reserves its bytes' time on the link after
// those reserved before it and waits until it is near.
type bucket struct {
	rate  float64
	moved atomic.Int64 // bytes taken
	mu    sync.Mutex
	next  time.Time // when the link is free of what was reserved
}

// bucketBurst is how far ahead of its turn a take may go: a few chunks,
// as a NIC's queue would send them back to back.
const bucketBurst = 2 * time.Millisecond

func newBucket(rate float64) *bucket { return &bucket{rate: rate} }

// take waits until n bytes may pass.
func (b *bucket) take(n int) {
	b.moved.Add(int64(n))
	if b.rate <= 0 {
		return
	}
	b.mu.Lock()
	now := time.Now()
	if b.next.Before(now) {
		b.next = now
	}
	b.next = b.next.Add(time.Duration(float64(n) / b.rate * float64(time.Second)))
	wait := b.next.Sub(now) - bucketBurst
	b.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
}
