package remote_test

import (
	"context"
	"testing"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// metered runs f with an action's meter (executor.Metered's) and returns
// what it counted.
func metered(t *testing.T, f func(m remote.Meter) error) (up, down int64) {
	t.Helper()
	res, err := executor.Metered(executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
		return &executor.Result{}, f(j.Meter)
	})).Execute(t.Context(), executor.Job{})
	if err != nil {
		t.Fatal(err)
	}
	return res.BytesUp, res.BytesDown
}

// TestMeterCountsWhatTheCallMoves: the meter a CAS call is given counts
// the bytes that call moved (uploads sent, blobs read, batched or
// streamed), a blob already present costs it nothing, and a call without
// one counts in the client's totals only.
func TestMeterCountsWhatTheCallMoves(t *testing.T) {
	_, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	small, big := randomBlob(1000), randomBlob(3<<20) // batched; streamed
	ds, db := digest.OfBytes(small), digest.OfBytes(big)
	blobs := map[digest.Digest][]byte{ds: small, db: big}
	both := int64(len(small) + len(big))
	if up, down := metered(t, func(m remote.Meter) error { return c.CAS.Ensure(t.Context(), m, blobs, nil) }); up != both || down != 0 {
		t.Errorf("the first upload counted %d up and %d down, want %d and 0", up, down, both)
	}
	if up, down := metered(t, func(m remote.Meter) error { return c.CAS.Ensure(t.Context(), m, blobs, nil) }); up != 0 || down != 0 {
		t.Errorf("an upload of blobs already present counted %d up and %d down", up, down)
	}
	if up, down := metered(t, func(m remote.Meter) error {
		_, err := c.ReadBlobs(t.Context(), m, []digest.Digest{ds, db})
		return err
	}); up != 0 || down != both {
		t.Errorf("reading both counted %d up and %d down, want 0 and %d", up, down, both)
	}
	if _, err := c.ReadBytes(t.Context(), nil, ds); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.BytesUploaded != both || st.BytesRead != both+int64(len(small)) {
		t.Errorf("the client's totals: %d bytes uploaded and %d read, want %d and %d (the unmetered read too)",
			st.BytesUploaded, st.BytesRead, both, both+int64(len(small)))
	}
}
