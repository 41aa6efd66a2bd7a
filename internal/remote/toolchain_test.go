package remote_test

import (
	"os"
	"testing"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestShippedToolchainOnceAndAgain: a shipped toolchain is uploaded by the
// first action alone and counted; evicted mid-run, it is uploaded again
// when the server says an input is missing, and the action runs.
func TestShippedToolchainOnceAndAgain(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	part := []byte("a library of the toolchain")
	partPath := t.TempDir() + "/libpart.so"
	os.WriteFile(partPath, part, 0o644)
	pd := digest.OfBytes(part)
	sub := reapi.NewTree()
	sub.AddFile("lib/libpart.so", pd, false)
	root, blobs, err := sub.Build()
	if err != nil {
		t.Fatal(err)
	}
	tc := &reapi.Shipped{Dir: ".tc", Root: root, Blobs: blobs, Files: map[digest.Digest]string{pd: partPath},
		// The test's commands are shell scripts: the host's shell runs them.
		Argv: func(string) []string { return []string{"/bin/sh"} }}
	ex := remote.NewExecutor(c, remote.ExecOptions{NoLookup: true, Toolchain: func(string) *reapi.Shipped { return tc }})
	as, outs := shellActions(t, 3, -1)
	for i := 0; i < 2; i++ {
		if res, err := ex.Execute(t.Context(), executor.Job{Action: as[i], Out: outs[i]}); err != nil || res.Failed() {
			t.Fatalf("action %d: %v %+v", i, err, res)
		}
	}
	st := ex.ToolchainStats()
	wantUp := pd.Size
	for d := range blobs {
		wantUp += d.Size
	}
	if !st.Used || st.Files != 1 || st.Bytes != pd.Size || st.Uploaded != wantUp {
		t.Errorf("after two actions: %+v, want the file and its messages (%d bytes) uploaded once", st, wantUp)
	}

	srv.Evict(pd.Proto())
	if res, err := ex.Execute(t.Context(), executor.Job{Action: as[2], Out: outs[2]}); err != nil || res.Failed() {
		t.Fatalf("after the toolchain's file was evicted: %v %+v", err, res)
	}
	if _, ok := srv.Blob(pd.Proto()); !ok {
		t.Error("the evicted file was not uploaded again")
	}
	if got := ex.ToolchainStats().Uploaded; got < wantUp+pd.Size {
		t.Errorf("uploaded %d bytes for the toolchain, want the file's %d again", got, pd.Size)
	}
}

// TestShippedToolchainGoesCompressed: under auto compression, on a link
// that has measured nothing yet (so auto sends other uploads as they
// are), the shipped toolchain's files go compressed, by ByteStream and in
// batches alike, where the server takes zstd.
func TestShippedToolchainGoesCompressed(t *testing.T) {
	_, addr := fake(t, reapitest.Options{Zstd: true})
	c := dial(t, addr, remote.Options{Compression: remote.CompressAuto})
	dir := t.TempDir()
	sub := reapi.NewTree()
	files := map[digest.Digest]string{}
	var size int64
	// A library (streamed: over the batch limit) and a small one (in a
	// batch), as compressible as machine code is.
	for _, f := range []struct {
		name string
		size int
	}{{"libbig.so", 9 << 20}, {"libsmall.so", 300 << 10}} {
		data := make([]byte, f.size)
		for i := range data {
			data[i] = byte(i/7) ^ byte(i%13)
		}
		p := dir + "/" + f.name
		os.WriteFile(p, data, 0o644)
		d := digest.OfBytes(data)
		sub.AddFile("lib/"+f.name, d, false)
		files[d] = p
		size += d.Size
	}
	root, blobs, err := sub.Build()
	if err != nil {
		t.Fatal(err)
	}
	tc := &reapi.Shipped{Dir: ".tc", Root: root, Blobs: blobs, Files: files,
		Argv: func(string) []string { return []string{"/bin/sh"} }}
	ex := remote.NewExecutor(c, remote.ExecOptions{NoLookup: true, Toolchain: func(string) *reapi.Shipped { return tc }})
	as, outs := shellActions(t, 1, -1)
	if res, err := ex.Execute(t.Context(), executor.Job{Action: as[0], Out: outs[0]}); err != nil || res.Failed() {
		t.Fatalf("%v %+v", err, res)
	}
	st := c.Stats()
	if st.BytesUploaded < size {
		t.Fatalf("uploaded %d bytes, want the toolchain's %d at least", st.BytesUploaded, size)
	}
	if st.WireBytesUploaded > st.BytesUploaded/2 {
		t.Errorf("sent %d bytes on the wire for %d bytes of blobs (toolchain %d): the toolchain went uncompressed",
			st.WireBytesUploaded, st.BytesUploaded, size)
	}
	if st.StreamWrites == 0 || st.BatchUpdateCalls == 0 {
		t.Errorf("want both a stream and a batch: %+v", st)
	}
}
