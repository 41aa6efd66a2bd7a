package remote_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestAutoCompression: under CompressAuto the blobs go as the link's
// throughput says (what an earlier link measured, Recall, until this one
// has measured its own) against zstd's speed here, timed on the first
// large upload: uploads compressed behind a slow link, not over a fast
// one, and a service never measured gets the safe choice, downloads
// compressed only. Tiny blobs go as they are either way.
func TestAutoCompression(t *testing.T) {
	compressible := func(n int, tag byte) []byte { return bytes.Repeat([]byte{tag, 1, 2, 3}, n/4) }
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name             string
		recall           *remote.Measured
		upZstd, downZstd bool
		says             string
	}{
		{"slow link", &remote.Measured{Up: remote.Rate{BytesPerSec: 1e6, Bytes: 1 << 30}, Down: remote.Rate{BytesPerSec: 1e6, Bytes: 1 << 30}},
			true, true, "uploads of 64 KiB or more compressed (1 of 2 transfers): measured 1.0 MB/s up by an earlier link"},
		{"fast link", &remote.Measured{Up: remote.Rate{BytesPerSec: 1e15, Bytes: 1 << 30}, Down: remote.Rate{BytesPerSec: 1e15, Bytes: 1 << 30}},
			false, false, "uploads not compressed (0 of 2 transfers): measured 1000000000.0 MB/s up by an earlier link"},
		{"never measured", nil, false, true, "uploads not compressed (0 of 2 transfers): no throughput up measured for this service yet, so the safe choice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 1 << 20, Zstd: true})
			c := dial(t, addr, remote.Options{Compression: remote.CompressAuto})
			if tc.recall != nil {
				c.Recall(*tc.recall)
			}
			// A tiny blob (batched) and one over the batch limit
			// (ByteStream), each way; roundTrip reads each twice.
			roundTrip(t, c, compressible(4<<10, 1), compressible(3<<20, 2))
			st := srv.Stats()
			if up := st.BytesUploadedWire < st.BytesUploadedRaw; up != tc.upZstd {
				t.Errorf("uploads compressed %v (%d bytes sent for %d), want %v", up, st.BytesUploadedWire, st.BytesUploadedRaw, tc.upZstd)
			}
			// The large blob is read twice; the tiny one never compressed.
			if want := map[bool]int64{true: 2}[tc.downZstd]; st.BlobsReadZstd != want {
				t.Errorf("%d blobs read compressed, want %d", st.BlobsReadZstd, want)
			}
			if got := c.CompressionChoice(); !strings.Contains(got, tc.says) {
				t.Errorf("CompressionChoice() = %q, want it to say %q", got, tc.says)
			}
			if z := c.Measured().Zstd; z == nil || z.Host != host || z.Large.Saved < 0.5 {
				t.Errorf("zstd's speed here not timed on the large upload: %+v", z)
			}
		})
	}
}
