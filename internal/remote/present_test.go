package remote

import (
	"context"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestUploadedDigestsShareOneEntry: once a blob's upload has ended well,
// or it was read from the CAS, the uploader keeps the one shared finished
// entry for it, not an entry with a channel of its own; a failed upload
// keeps none, so that a later action tries again.
func TestUploadedDigestsShareOneEntry(t *testing.T) {
	srv := reapitest.NewFakeServer(reapitest.Options{})
	addr, err := srv.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, Options{Target: "grpc://" + addr, RPCTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	a, b := []byte("uploaded"), []byte("read")
	da, db := digest.OfBytes(a), digest.OfBytes(b)
	if err := c.CAS.Ensure(ctx, nil, map[digest.Digest][]byte{da: a}, nil); err != nil {
		t.Fatal(err)
	}
	c.CAS.MarkPresent(db)
	for _, d := range []digest.Digest{da, db} {
		if e := c.CAS.m[d]; e != present || !c.CAS.Present(d) {
			t.Errorf("%s: entry %p, want the shared one %p, present", d, e, present)
		}
	}

	bad := map[digest.Digest][]byte{digest.OfBytes([]byte("x")): []byte("not x")}
	if err := c.CAS.Ensure(ctx, nil, bad, nil); err == nil {
		t.Fatal("a blob that does not match its digest was uploaded")
	}
	for d := range bad {
		if e, ok := c.CAS.m[d]; ok {
			t.Errorf("a failed upload left entry %p", e)
		}
	}
}
