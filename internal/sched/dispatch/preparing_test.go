package dispatch

import (
	"testing"
	"time"
)

// TestPreparing: the bound grows with the round trip, so that the
// preparations in flight cover it, and with the cores they keep busy.
func TestPreparing(t *testing.T) {
	for _, c := range []struct {
		rtt   time.Duration
		cores int
		want  int
	}{
		{200 * time.Microsecond, 2, 32}, // loopback: the floor
		{5 * time.Millisecond, 2, 42},
		{25 * time.Millisecond, 2, 202},
		{25 * time.Millisecond, 16, 1616},
		{0, 64, 64},
	} {
		if got := Preparing(c.rtt, c.cores); got != c.want {
			t.Errorf("Preparing(%v, %d) = %d, want %d", c.rtt, c.cores, got, c.want)
		}
	}
}

// TestInFlight: an action per slot, and LocalAhead more per local slot;
// with no remote slot (a remote cache alone), the local slots' share.
func TestInFlight(t *testing.T) {
	for _, c := range []struct{ remote, local, want int }{
		{256, 2, 256 + 2*(1+LocalAhead)},
		{0, 4, 4 * (1 + LocalAhead)},
		{16, 0, 16},
	} {
		if got := InFlight(c.remote, c.local); got != c.want {
			t.Errorf("InFlight(%d, %d) = %d, want %d", c.remote, c.local, got, c.want)
		}
	}
}
