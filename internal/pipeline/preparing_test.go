package pipeline

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
