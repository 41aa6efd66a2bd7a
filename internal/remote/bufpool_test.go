package remote

import "testing"

// TestReadBufs: a buffer has the length asked for and the capacity of its
// tier (the next power of two from 4 KiB), and only such buffers are kept;
// beyond 4 MiB a buffer is plain memory.
func TestReadBufs(t *testing.T) {
	var p readBufs
	for _, c := range []struct{ n, cap int }{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192}, {100 << 10, 128 << 10}, {4 << 20, 4 << 20}, {4<<20 + 1, 4<<20 + 1},
	} {
		b := p.get(c.n)
		if len(*b) != c.n || cap(*b) != c.cap {
			t.Errorf("get(%d): len %d cap %d, want len %d cap %d", c.n, len(*b), cap(*b), c.n, c.cap)
		}
		p.put(b)
	}
	odd := make([]byte, 5000)
	p.put(&odd) // not a tier's capacity: dropped, never handed out
	for range 100 {
		if b := p.get(5000); cap(*b) != 8192 {
			t.Fatalf("get(5000) returned a buffer of capacity %d", cap(*b))
		}
	}
}
