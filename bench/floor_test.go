package main

import (
	"testing"

	"github.com/thindist/thindist/internal/reapitest"
)

// TestMeasureCalls: the floor's client makes the calls it reports on (the
// warm-up, n alone, n in flight) and measures some CPU for each kind.
func TestMeasureCalls(t *testing.T) {
	srv := reapitest.NewFakeServer(reapitest.Options{})
	addr, err := srv.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	const n = 640
	f, err := measureCalls(addr, n)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(n/10/floorInFlight*floorInFlight + n + n/floorInFlight*floorInFlight)
	if got := srv.Stats().FindMissingBlobsCalls; got != want {
		t.Errorf("the server answered %d FindMissingBlobs calls, want %d", got, want)
	}
	if f.Calls != n || f.Alone <= 0 || f.InFlight <= 0 {
		t.Errorf("floor %+v: want %d calls and some CPU per call of each kind", f, n)
	}
}
