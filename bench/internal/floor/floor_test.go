package floor

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestMeasureCalls: the floor's client makes the calls it reports on (the
// warm-up, n alone, n in flight) and measures some CPU for each kind.
func TestMeasureCalls(t *testing.T) {
	srv, addr := reapitest.StartT(t, reapitest.Options{})
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

// TestMeasureActions: the bare cold actions run on the test double, which
// executes them (one warm-up round and two measured ones), and each makes
// the calls it stands for; their outputs are written whole.
func TestMeasureActions(t *testing.T) {
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n, rounds = 3, 2
	dir := t.TempDir()
	f, err := measureActions(conn, dir, n, rounds, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.Actions != n || f.Apart != time.Millisecond || f.PerAction <= 0 {
		t.Errorf("floor %+v: want %d actions 1ms apart and some CPU per action", f, n)
	}
	st := srv.Stats()
	actions := int64(n * (rounds + 1))
	if st.Executions != actions || st.ACMisses != actions || st.ACUpdates != actions || st.FindMissingBlobsCalls != actions {
		t.Errorf("the server executed %d, missed %d lookups, stored %d results and answered %d FindMissingBlobs; want %d each",
			st.Executions, st.ACMisses, st.ACUpdates, st.FindMissingBlobsCalls, actions)
	}
	// Each round's input, directory and messages are new but for the
	// Commands, which the first round uploads.
	if up := 4*actions + n; st.BlobsUploaded != up || st.BlobsRead != actions {
		t.Errorf("%d blobs uploaded and %d read, want %d and %d", st.BlobsUploaded, st.BlobsRead, up, actions)
	}
	for i := range n {
		fi, err := os.Stat(filepath.Join(dir, strconv.Itoa(i)+".o"))
		if err != nil {
			t.Errorf("output %d: %v", i, err)
		} else if fi.Size() != floorActionOut {
			t.Errorf("output %d: %d bytes, want %d", i, fi.Size(), floorActionOut)
		}
	}
}

// TestMeasureIdleCalls: the calls after idleness are made, and measured.
func TestMeasureIdleCalls(t *testing.T) {
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	const n = 20
	call, idle, err := measureIdleCalls(addr, n, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := srv.Stats().FindMissingBlobsCalls, int64(n/10+n); got != want {
		t.Errorf("the server answered %d FindMissingBlobs calls, want %d", got, want)
	}
	if call <= 0 || idle < 0 {
		t.Errorf("%v per call after idleness, %v per idle spell: want some CPU per call", call, idle)
	}
}
