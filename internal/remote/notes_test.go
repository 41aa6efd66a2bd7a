package remote

import (
	"testing"
	"time"
)

// TestLinkMeasurementRemembered: what a link measured of a service's link
// is recalled by the next link to that service, with this machine's zstd
// speed, in the one notes file that also holds the unreachable mark; a
// mark set and cleared leaves the measurements, another service's are its
// own, and a link that measured nothing forgets nothing.
func TestLinkMeasurementRemembered(t *testing.T) {
	notes := NotesIn(t.TempDir())
	if m := notes.Recall("grpc://a:1"); m != (Measured{}) {
		t.Fatalf("recalled %+v from an empty directory", m)
	}
	z := &ZstdSpeed{Host: "here", Large: ZstdClass{Compress: 2e8, Decompress: 1e9, Saved: 0.3}}
	a := Measured{Up: Rate{BytesPerSec: 12e6, Bytes: 200 << 20}, Down: Rate{BytesPerSec: 11e6, Bytes: 150 << 20}, Zstd: z}
	notes.Remember("grpc://a:1", a)
	notes.Remember("grpc://b:1", Measured{Up: Rate{BytesPerSec: 1e9, Bytes: 1 << 30}})
	notes.MarkUnreachable("grpc://b:1", time.Now())
	if notes.Unreachable("grpc://b:1", time.Now()) == nil {
		t.Fatalf("the unreachable mark was not kept beside the measurements")
	}
	notes.ClearUnreachable("grpc://b:1")
	notes.Remember("grpc://a:1", Measured{}) // measured nothing
	got := notes.Recall("grpc://a:1")
	if got.Up != a.Up || got.Down != a.Down || got.Zstd == nil || *got.Zstd != *z {
		t.Errorf("recalled %+v (zstd %+v), want %+v", got, got.Zstd, a)
	}
	if b := notes.Recall("grpc://b:1"); b.Up.BytesPerSec != 1e9 || b.Zstd == nil {
		t.Errorf("service b recalled %+v: want its own throughput and this machine's zstd", b)
	}
	if notes.read().Unreachable != nil {
		t.Errorf("the cleared mark is still there")
	}
}
