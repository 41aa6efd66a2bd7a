package bitcode

import (
	"math/rand"
	"testing"
)

// refRead reads n bits at pos one bit at a time: what read and readVBR's
// word-at-a-time paths must agree with.
func refRead(data []byte, pos uint64, n uint) uint64 {
	var v uint64
	for i := uint(0); i < n; i++ {
		p := pos + uint64(i)
		v |= uint64(data[p/8]>>(p%8)&1) << i
	}
	return v
}

func refVBR(data []byte, pos, end uint64, n uint) (v, next uint64, ok bool) {
	var shift uint
	for {
		if pos+uint64(n) > end {
			return 0, 0, false
		}
		piece := refRead(data, pos, n)
		pos += uint64(n)
		data := piece & (1<<(n-1) - 1)
		if shift >= 64 || (shift > 0 && data>>(64-shift) != 0) {
			return 0, 0, false
		}
		v |= data << shift
		if piece&(1<<(n-1)) == 0 {
			return v, pos, true
		}
		shift += n - 1
	}
}

// TestBitReaderAgainstReference reads random fields and VBRs from random
// bytes, near the end of the data too (where the one-load paths do not
// apply), and compares each value and position with a bit-at-a-time read.
func TestBitReaderAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 2000; round++ {
		data := make([]byte, 1+rng.Intn(40))
		rng.Read(data)
		if round%3 == 0 {
			// Continuation bits mostly clear, so that VBRs end: short
			// and long values both.
			for i := range data {
				data[i] &= byte(rng.Intn(256))
			}
		}
		end := uint64(len(data)) * 8
		if rng.Intn(2) == 0 {
			end -= uint64(rng.Intn(8)) // a limit inside the last byte
		}
		r := &bitReader{data: data, end: end}
		for r.pos < r.end {
			pos := r.pos
			if rng.Intn(2) == 0 {
				n := uint(rng.Intn(65))
				got, err := r.read(n)
				if pos+uint64(n) > end {
					if err == nil {
						t.Fatalf("read(%d) at %d of %d: no error", n, pos, end)
					}
					break
				}
				if err != nil || got != refRead(data, pos, n) || r.pos != pos+uint64(n) {
					t.Fatalf("read(%d) at %d: %#x, %v, pos %d; want %#x", n, pos, got, err, r.pos, refRead(data, pos, n))
				}
				continue
			}
			n := uint(2 + rng.Intn(31))
			want, next, ok := refVBR(data, pos, end, n)
			got, err := r.readVBR(n)
			if !ok {
				if err == nil {
					t.Fatalf("readVBR(%d) at %d of %d: %#x, want an error", n, pos, end, got)
				}
				break
			}
			if err != nil || got != want || r.pos != next {
				t.Fatalf("readVBR(%d) at %d: %#x, %v, pos %d; want %#x, pos %d", n, pos, got, err, r.pos, want, next)
			}
		}
	}
}
