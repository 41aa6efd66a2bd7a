package remote_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// fake starts a REAPI test double for the test.
var fake = reapitest.StartT

func dial(t *testing.T, addr string, o remote.Options) *remote.Client {
	t.Helper()
	o.Target = "grpc://" + addr
	if o.RPCTimeout == 0 {
		o.RPCTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := remote.Dial(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randomBlob(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// roundTrip uploads blobs and reads them back together, checking the
// content.
func roundTrip(t *testing.T, c *remote.Client, blobs ...[]byte) {
	t.Helper()
	m := map[digest.Digest][]byte{}
	var ds []digest.Digest
	for _, b := range blobs {
		d := digest.OfBytes(b)
		m[d] = b
		ds = append(ds, d)
	}
	if err := c.CAS.Ensure(t.Context(), nil, m, nil); err != nil {
		t.Fatalf("upload: %v", err)
	}
	back, err := c.ReadBlobs(t.Context(), nil, ds)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	for d, want := range m {
		if !bytes.Equal(back[d], want) {
			t.Fatalf("blob %s read back wrong", d)
		}
	}
	for _, d := range ds {
		one, err := c.ReadBytes(t.Context(), nil, d)
		if err != nil || !bytes.Equal(one, m[d]) {
			t.Fatalf("ReadBytes %s: %v", d, err)
		}
	}
}

// TestCompressionModes: by default blobs come down in zstd and go up as
// they are; CompressAll compresses uploads too; CompressNone neither. Both
// batched and ByteStream transfers follow the mode.
func TestCompressionModes(t *testing.T) {
	compressible := func(n int, tag byte) []byte { return bytes.Repeat([]byte{tag, 1, 2, 3}, n/4) }
	for _, tc := range []struct {
		name               string
		mode               remote.Compression
		upZstd, downZstd   bool
		wantCompressionMsg string
	}{
		{"downloads", remote.CompressDownloads, false, true, "zstd for downloads"},
		{"all", remote.CompressAll, true, true, "zstd both ways"},
		{"none", remote.CompressNone, false, false, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 1 << 20, Zstd: true})
			c := dial(t, addr, remote.Options{Compression: tc.mode})
			if got := c.Compression(); got != tc.wantCompressionMsg {
				t.Errorf("Compression() = %q, want %q", got, tc.wantCompressionMsg)
			}
			// One small blob (batched) and one over the batch limit
			// (ByteStream), each way; roundTrip reads each twice.
			roundTrip(t, c, compressible(64<<10, 1), compressible(3<<20, 2))
			st := srv.Stats()
			if st.BlobsUploaded != 2 || st.BlobsRead != 4 {
				t.Fatalf("%d blobs uploaded, %d read; want 2 and 4", st.BlobsUploaded, st.BlobsRead)
			}
			if up := st.BytesUploadedWire < st.BytesUploadedRaw; up != tc.upZstd {
				t.Errorf("uploads compressed %v (%d bytes sent for %d), want %v", up, st.BytesUploadedWire, st.BytesUploadedRaw, tc.upZstd)
			}
			if want := map[bool]int64{true: 4}[tc.downZstd]; st.BlobsReadZstd != want {
				t.Errorf("%d blobs read compressed, want %d", st.BlobsReadZstd, want)
			}
		})
	}
	// A server without zstd gets plain transfers whatever the mode.
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{Compression: remote.CompressAll})
	roundTrip(t, c, compressible(64<<10, 3))
	if st := srv.Stats(); st.BytesUploadedWire != st.BytesUploadedRaw || st.BlobsReadZstd != 0 || c.Compression() != "none" {
		t.Errorf("zstd used with a server that does not offer it: %+v, %q", st, c.Compression())
	}
}

// TestCompressionWithoutBatchCompressors: a server that takes and serves
// zstd only over ByteStream (Buildbarn: no batch compressors, and its
// BatchReadBlobs ignores acceptable_compressors) still gets a blob that is
// to travel compressed compressed, over ByteStream although it fits in a
// batch; tiny blobs stay in batches, as they are.
func TestCompressionWithoutBatchCompressors(t *testing.T) {
	compressible := func(n int, tag byte) []byte { return bytes.Repeat([]byte{tag, 1, 2, 3}, n/4) }
	for _, tc := range []struct {
		name   string
		mode   remote.Compression
		upZstd bool
	}{
		{"downloads", remote.CompressDownloads, false},
		{"all", remote.CompressAll, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 1 << 20, Zstd: true, ZstdStreamOnly: true})
			c := dial(t, addr, remote.Options{Compression: tc.mode})
			small, tiny := compressible(256<<10, 1), compressible(1<<10, 2)
			roundTrip(t, c, small, tiny)
			st := srv.Stats()
			if st.BatchRejections != 0 {
				t.Errorf("%d batches refused", st.BatchRejections)
			}
			if up := st.BytesUploadedWire < st.BytesUploadedRaw; up != tc.upZstd {
				t.Errorf("uploads compressed %v (%d bytes sent for %d), want %v", up, st.BytesUploadedWire, st.BytesUploadedRaw, tc.upZstd)
			}
			if tc.upZstd && st.RPCs[reapitest.MethodWrite] != 1 {
				t.Errorf("%d ByteStream writes, want 1 (the 256 KiB blob, compressed)", st.RPCs[reapitest.MethodWrite])
			}
			if st.BlobsReadZstd != 2 { // roundTrip reads each blob twice
				t.Errorf("%d blobs read compressed, want the 256 KiB blob's 2 reads", st.BlobsReadZstd)
			}
			if st.RPCs[reapitest.MethodBatchReadBlobs] == 0 {
				t.Errorf("the tiny blob was not read in a batch: %v", st.RPCs)
			}
		})
	}
}

// TestBatchesOfOneUploadOverlap: an upload of several batches (an action
// importing hundreds of modules) has more than one in flight, so that it
// costs about one round trip rather than one per batch; and no more than
// the bound, so that one action does not take every connection.
func TestBatchesOfOneUploadOverlap(t *testing.T) {
	var mu sync.Mutex
	inFlight, peak := 0, 0
	srv, addr := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 64 << 10, Hook: func(method string, _ metadata.MD) error {
		if method != reapitest.MethodBatchUpdateBlobs {
			return nil
		}
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		// A round trip long enough for the client to send the next
		// batch meanwhile, if it does not wait for this one.
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}})
	c := dial(t, addr, remote.Options{})
	var blobs [][]byte
	for range 10 {
		blobs = append(blobs, randomBlob(40<<10)) // one per batch
	}
	roundTrip(t, c, blobs...)
	if n := srv.Stats().RPCs[reapitest.MethodBatchUpdateBlobs]; n < 10 {
		t.Fatalf("%d BatchUpdateBlobs calls for 10 blobs of 40 KiB under a 64 KiB limit; the test needs one each", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak < 2 || peak > 4 {
		t.Errorf("at most %d batches of one upload in flight at once, want 2 to 4", peak)
	}
}

// TestBatchLimitUnadvertised: a server that advertises no batch limit but
// enforces a 2 MiB message size (stock Buildbarn) gets batches of at most
// 1 MiB and larger blobs over ByteStream: nothing is refused.
func TestBatchLimitUnadvertised(t *testing.T) {
	for _, zstd := range []bool{false, true} {
		srv, addr := fake(t, reapitest.Options{MaxMessageSizeBytes: 2 << 20, Zstd: zstd})
		c := dial(t, addr, remote.Options{Compression: remote.CompressAll})
		if got := c.BatchLimit(); got != 1<<20 {
			t.Errorf("batch limit with none advertised: %d, want 1 MiB", got)
		}
		roundTrip(t, c, randomBlob(600<<10), randomBlob(700<<10), randomBlob(300<<10), randomBlob(3<<20), randomBlob(10))
		st := srv.Stats()
		if st.BatchRejections != 0 {
			t.Errorf("zstd %v: %d batches refused", zstd, st.BatchRejections)
		}
		if st.RPCs[reapitest.MethodWrite] == 0 || st.RPCs[reapitest.MethodRead] == 0 {
			t.Errorf("zstd %v: the 3 MiB blob did not travel over ByteStream: %v", zstd, st.RPCs)
		}
	}
}

// TestBatchRefusedFallsBackToByteStream: a server whose message limit is
// below the batch limit it advertises refuses batches (InvalidArgument
// from its handler, ResourceExhausted from gRPC itself): those blobs go over
// ByteStream, and the batch limit drops for the rest of the run.
func TestBatchRefusedFallsBackToByteStream(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 4 << 20, MaxMessageSizeBytes: 2 << 20, Zstd: true})
	c := dial(t, addr, remote.Options{Compression: remote.CompressAll})
	if got := c.BatchLimit(); got != 4<<20 {
		t.Fatalf("batch limit %d, want the advertised 4 MiB", got)
	}
	// Compressible blobs pass gRPC's own limit, so the handler's
	// InvalidArgument check refuses them.
	zeros := func(n int, tag byte) []byte { b := make([]byte, n); b[0] = tag; return b }
	roundTrip(t, c, zeros(1<<20, 1), zeros(1<<20, 2), zeros(1<<20, 3))
	st := srv.Stats()
	if st.BatchRejections == 0 {
		t.Errorf("no batch was refused: the test does not test the fallback")
	}
	if got := c.BatchLimit(); got > 2<<20 {
		t.Errorf("the batch limit stayed at %d after a refused batch", got)
	}
	// Random blobs: over gRPC's limit on the wire (ResourceExhausted).
	srv2, addr2 := fake(t, reapitest.Options{MaxBatchTotalSizeBytes: 4 << 20, MaxMessageSizeBytes: 2 << 20})
	c2 := dial(t, addr2, remote.Options{})
	roundTrip(t, c2, randomBlob(3<<20), randomBlob(100<<10))
	if st := srv2.Stats(); st.RPCs[reapitest.MethodWrite] == 0 {
		t.Errorf("nothing was streamed: %v", st.RPCs)
	}
	if got := c2.BatchLimit(); got > 2<<20 {
		t.Errorf("the batch limit stayed at %d after a refused batch", got)
	}
}

// TestCheckCAS: doctor's CAS check round-trips a blob above a stock
// Buildbarn's message limit.
func TestCheckCAS(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{MaxMessageSizeBytes: 2 << 20})
	c := dial(t, addr, remote.Options{})
	if err := c.CheckCAS(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.BytesUploadedRaw < remote.CheckCASBigBlob || st.BatchRejections != 0 {
		t.Errorf("uploaded %d bytes, %d batches refused", st.BytesUploadedRaw, st.BatchRejections)
	}
}

// TestReadBlobsOneBatch: an action's small outputs and stderr come back in
// one BatchReadBlobs call.
func TestReadBlobsOneBatch(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	var ds []digest.Digest
	for i := 0; i < 5; i++ {
		b := randomBlob(10 << 10)
		srv.PutBlob(b)
		ds = append(ds, digest.OfBytes(b))
	}
	srv.ResetStats()
	if _, err := c.ReadBlobs(t.Context(), nil, ds); err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().RPCs[reapitest.MethodBatchReadBlobs]; n != 1 {
		t.Errorf("%d BatchReadBlobs calls for 5 small blobs, want 1", n)
	}
}

// TestCorruptReadBounded: a blob that always comes back corrupt is tried
// at most MaxAttempts times in all.
func TestCorruptReadBounded(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{MaxAttempts: 3})
	b := randomBlob(1000)
	srv.PutBlob(b)
	srv.InjectFault(reapitest.MethodBatchReadBlobs, reapitest.FaultCorruptRead, 1000)
	srv.ResetStats()
	if _, err := c.ReadBytes(t.Context(), nil, digest.OfBytes(b)); err == nil {
		t.Fatal("a corrupt blob was accepted")
	}
	if n := srv.Stats().RPCs[reapitest.MethodBatchReadBlobs]; n != 3 {
		t.Errorf("%d reads of a corrupt blob, want 3", n)
	}
}

// TestRetryAcrossRestart: calls made while the server restarts (connection
// refused for a while) succeed once it is back, within the retry window.
func TestRetryAcrossRestart(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{MaxAttempts: 10})
	if err := c.CheckCAS(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Bounce(1500 * time.Millisecond) }()
	time.Sleep(100 * time.Millisecond) // the server is down now
	if err := c.CheckCAS(t.Context()); err != nil {
		t.Errorf("across a restart: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestUploadTrustsUnchangedDigests: a file the run's memo digested, long
// enough after its last write for its stamp to tell (plainfile.RacyWindow),
// is uploaded as it is; a file written since it was digested is caught,
// not sent under its old digest, whether or not its stamp could be trusted.
func TestUploadTrustsUnchangedDigests(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	files := digest.NewFiles()
	c.CAS.UseDigests(files)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kept, racy, old := write("kept.o", randomBlob(5000)), write("racy.o", randomBlob(5000)), write("old.o", randomBlob(5000))
	time.Sleep(plainfile.RacyWindow + 100*time.Millisecond)
	dKept, _ := files.Get(kept)
	dOld, _ := files.Get(old)
	racy = write("racy.o", randomBlob(5000)) // written just now: its stamp is racy
	dRacy, _ := files.Get(racy)
	if err := c.CAS.Ensure(t.Context(), nil, nil, map[digest.Digest]string{dKept: kept}); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.Blob(dKept.Proto()); !ok || digest.OfBytes(got) != dKept {
		t.Fatalf("the unchanged file did not arrive whole")
	}
	time.Sleep(10 * time.Millisecond) // past the file system's clock tick
	write("old.o", randomBlob(5000))
	write("racy.o", randomBlob(5000))
	for p, d := range map[string]digest.Digest{old: dOld, racy: dRacy} {
		err := c.CAS.Ensure(t.Context(), nil, nil, map[digest.Digest]string{d: p})
		if err == nil || !strings.Contains(err.Error(), "changed while thindist was running") {
			t.Errorf("%s, rewritten after it was digested: %v", filepath.Base(p), err)
		}
		if _, ok := srv.Blob(d.Proto()); ok {
			t.Errorf("%s: the server holds a blob under its old digest", filepath.Base(p))
		}
	}
}
