package pipeline

import (
	"testing"
	"time"

	"github.com/thindist/thindist/internal/remote"
)

// TestLinkMeasurementRemembered: what a link measured of a service's link
// is recalled by the next link to that service, with this machine's zstd
// speed, in the one notes file that also holds the unreachable mark; a
// mark set and cleared leaves the measurements, another service's are its
// own, and a link that measured nothing forgets nothing.
func TestLinkMeasurementRemembered(t *testing.T) {
	dir := t.TempDir()
	if m := recallLink(dir, "grpc://a:1"); m != (remote.Measured{}) {
		t.Fatalf("recalled %+v from an empty directory", m)
	}
	z := &remote.ZstdSpeed{Host: "here", Large: remote.ZstdClass{Compress: 2e8, Decompress: 1e9, Saved: 0.3}}
	a := remote.Measured{Up: remote.Rate{BytesPerSec: 12e6, Bytes: 200 << 20}, Down: remote.Rate{BytesPerSec: 11e6, Bytes: 150 << 20}, Zstd: z}
	rememberLink(dir, "grpc://a:1", a)
	rememberLink(dir, "grpc://b:1", remote.Measured{Up: remote.Rate{BytesPerSec: 1e9, Bytes: 1 << 30}})
	markUnreachable(dir, "grpc://b:1", time.Now())
	if skipRemote(dir, "grpc://b:1", time.Now()) == nil {
		t.Fatalf("the unreachable mark was not kept beside the measurements")
	}
	clearUnreachable(dir, "grpc://b:1")
	rememberLink(dir, "grpc://a:1", remote.Measured{}) // measured nothing
	got := recallLink(dir, "grpc://a:1")
	if got.Up != a.Up || got.Down != a.Down || got.Zstd == nil || *got.Zstd != *z {
		t.Errorf("recalled %+v (zstd %+v), want %+v", got, got.Zstd, a)
	}
	if b := recallLink(dir, "grpc://b:1"); b.Up.BytesPerSec != 1e9 || b.Zstd == nil {
		t.Errorf("service b recalled %+v: want its own throughput and this machine's zstd", b)
	}
	if readNotes(dir).Unreachable != nil {
		t.Errorf("the cleared mark is still there")
	}
}
