package reapitest

import (
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// write sends chunks with ByteStream Write starting at offset. If finish is
// false the stream is half-closed without finish_write.
func (c *Client) write(t *testing.T, name string, offset int64, chunks [][]byte, finish bool) (*bspb.WriteResponse, error) {
	t.Helper()
	stream, err := c.ByteStream.Write(callContext(t))
	if err != nil {
		return nil, err
	}
	for i, ch := range chunks {
		req := &bspb.WriteRequest{WriteOffset: offset, Data: ch, FinishWrite: finish && i == len(chunks)-1}
		if i == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		offset += int64(len(ch))
	}
	return stream.CloseAndRecv()
}

func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		comp []repb.Compressor_Value
	}{
		{Options{}, nil},
		{Options{Zstd: true, MaxBatchTotalSizeBytes: 4 << 20}, []repb.Compressor_Value{repb.Compressor_ZSTD}},
	} {
		_, c := startFake(t, tc.opts)
		caps, err := c.Capabilities.GetCapabilities(callContext(t), &repb.GetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		cc := caps.CacheCapabilities
		if len(cc.DigestFunctions) != 1 || cc.DigestFunctions[0] != repb.DigestFunction_SHA256 ||
			cc.MaxBatchTotalSizeBytes != tc.opts.MaxBatchTotalSizeBytes ||
			!cc.ActionCacheUpdateCapabilities.UpdateEnabled ||
			!equalComps(cc.SupportedCompressors, tc.comp) || !equalComps(cc.SupportedBatchUpdateCompressors, tc.comp) {
			t.Fatalf("cache capabilities %v", cc)
		}
		ec := caps.ExecutionCapabilities
		if !ec.ExecEnabled || ec.DigestFunction != repb.DigestFunction_SHA256 {
			t.Fatalf("execution capabilities %v", ec)
		}
	}
}

func equalComps(a, b []repb.Compressor_Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBatchUpdateReadFindMissing(t *testing.T) {
	s, c := startFake(t, Options{Zstd: true, MaxBatchTotalSizeBytes: 100})
	good := []byte("good blob")
	big := []byte(strings.Repeat("z", 60))
	resp, err := c.CAS.BatchUpdateBlobs(callContext(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: DigestOf(good), Data: good},
		{Digest: DigestOf([]byte("other")), Data: []byte("wrong")},
		{Digest: DigestOf(big), Data: ZstdCompress(big), Compressor: repb.Compressor_ZSTD},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Responses[0].Status.GetCode() != 0 || resp.Responses[1].Status.GetCode() != int32(codes.InvalidArgument) || resp.Responses[2].Status.GetCode() != 0 {
		t.Fatalf("responses %v", resp.Responses)
	}
	ups := s.Uploads()
	if len(ups) != 2 || ups[1].Compressor != repb.Compressor_ZSTD || ups[1].SizeBytes != 60 || ups[1].WireBytes != int64(len(ZstdCompress(big))) {
		t.Fatalf("uploads %+v", ups)
	}
	if st := s.Stats(); st.BlobsUploaded != 2 || st.BytesUploadedRaw != int64(len(good)+60) || st.BytesUploadedWire >= st.BytesUploadedRaw {
		t.Fatalf("stats %+v", st)
	}

	fm, err := c.CAS.FindMissingBlobs(callContext(t), &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{DigestOf(good), DigestOf([]byte("other")), DigestOf(big)}})
	if err != nil || len(fm.MissingBlobDigests) != 1 || fm.MissingBlobDigests[0].Hash != DigestOf([]byte("other")).Hash {
		t.Fatalf("FindMissingBlobs %v %v", fm, err)
	}

	rd, err := c.CAS.BatchReadBlobs(callContext(t), &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{DigestOf(good), DigestOf([]byte("other"))}})
	if err != nil || string(rd.Responses[0].Data) != "good blob" || rd.Responses[0].Compressor != repb.Compressor_IDENTITY ||
		rd.Responses[1].Status.GetCode() != int32(codes.NotFound) {
		t.Fatalf("BatchReadBlobs %v %v", rd, err)
	}
	rd, err = c.CAS.BatchReadBlobs(callContext(t), &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{DigestOf(big)},
		AcceptableCompressors: []repb.Compressor_Value{repb.Compressor_ZSTD}})
	if err != nil || rd.Responses[0].Compressor != repb.Compressor_ZSTD {
		t.Fatalf("zstd BatchReadBlobs %v %v", rd, err)
	}
	if got, err := zstdDecompress(rd.Responses[0].Data); err != nil || string(got) != string(big) {
		t.Fatalf("zstd data %q %v", got, err)
	}

	// Over MaxBatchTotalSizeBytes.
	_, err = c.CAS.BatchReadBlobs(callContext(t), &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{DigestOf(big), DigestOf(big)}})
	wantCode(t, err, codes.InvalidArgument)
}

func TestZstdRejectedWhenDisabled(t *testing.T) {
	_, c := startFake(t, Options{})
	b := []byte("data")
	resp, err := c.CAS.BatchUpdateBlobs(callContext(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: DigestOf(b), Data: ZstdCompress(b), Compressor: repb.Compressor_ZSTD}}})
	if err != nil || resp.Responses[0].Status.GetCode() != int32(codes.InvalidArgument) {
		t.Fatalf("%v %v", resp, err)
	}
	_, err = c.read(t, "compressed-blobs/zstd/"+DigestOf(b).Hash+"/4")
	wantCode(t, err, codes.InvalidArgument)
}

func TestByteStreamWriteRead(t *testing.T) {
	s, c := startFake(t, Options{Zstd: true})
	blob := []byte(strings.Repeat("thinlto object ", 10000))
	d := DigestOf(blob)
	name := "inst/uploads/3f9c/blobs/" + d.Hash + "/" + itoa(d.SizeBytes)
	wr, err := c.write(t, name, 0, [][]byte{blob[:1000], blob[1000:]}, true)
	if err != nil || wr.CommittedSize != d.SizeBytes {
		t.Fatalf("Write: %v %v", wr, err)
	}
	got, err := c.read(t, "inst/blobs/"+d.Hash+"/"+itoa(d.SizeBytes))
	if err != nil || string(got) != string(blob) {
		t.Fatalf("Read: %d bytes, %v", len(got), err)
	}
	// Offset and limit.
	stream, err := c.ByteStream.Read(callContext(t), &bspb.ReadRequest{ResourceName: "inst/blobs/" + d.Hash + "/" + itoa(d.SizeBytes), ReadOffset: 15, ReadLimit: 7})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil || string(msg.Data) != "thinlto" {
		t.Fatalf("offset read %q %v", msg.GetData(), err)
	}

	// Compressed upload: committed_size is the compressed length.
	blob2 := []byte(strings.Repeat("compressed ", 5000))
	d2 := DigestOf(blob2)
	comp := ZstdCompress(blob2)
	wr, err = c.write(t, "uploads/u2/compressed-blobs/zstd/"+d2.Hash+"/"+itoa(d2.SizeBytes), 0, [][]byte{comp[:10], comp[10:]}, true)
	if err != nil || wr.CommittedSize != int64(len(comp)) {
		t.Fatalf("compressed Write: %v %v", wr, err)
	}
	got, err = c.read(t, "compressed-blobs/zstd/"+d2.Hash+"/"+itoa(d2.SizeBytes))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = zstdDecompress(got); err != nil || string(got) != string(blob2) {
		t.Fatalf("compressed Read: %v", err)
	}
	ups := s.Uploads()
	if len(ups) != 2 || ups[0].Method != MethodWrite || ups[0].WireBytes != d.SizeBytes || ups[1].WireBytes != int64(len(comp)) || ups[1].SizeBytes != d2.SizeBytes {
		t.Fatalf("uploads %+v", ups)
	}

	// Digest mismatch.
	bad := DigestOf([]byte("expected"))
	_, err = c.write(t, "uploads/u3/blobs/"+bad.Hash+"/"+itoa(bad.SizeBytes), 0, [][]byte{[]byte("somethin")}, true)
	wantCode(t, err, codes.InvalidArgument)
	_, err = c.read(t, "blobs/"+bad.Hash+"/"+itoa(bad.SizeBytes))
	wantCode(t, err, codes.NotFound)
	_, err = c.read(t, "nonsense")
	wantCode(t, err, codes.InvalidArgument)
}

func TestByteStreamQueryWriteStatusAndResume(t *testing.T) {
	_, c := startFake(t, Options{})
	blob := []byte("0123456789abcdef")
	d := DigestOf(blob)
	name := "uploads/u/blobs/" + d.Hash + "/" + itoa(d.SizeBytes)
	qs, err := c.ByteStream.QueryWriteStatus(callContext(t), &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || qs.CommittedSize != 0 || qs.Complete {
		t.Fatalf("before: %v %v", qs, err)
	}
	// Half-close without finish_write: the server keeps the prefix.
	_, err = c.write(t, name, 0, [][]byte{blob[:6]}, false)
	if err == nil {
		t.Fatal("unfinished write succeeded")
	}
	qs, err = c.ByteStream.QueryWriteStatus(callContext(t), &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || qs.CommittedSize != 6 || qs.Complete {
		t.Fatalf("partial: %v %v", qs, err)
	}
	wr, err := c.write(t, name, 6, [][]byte{blob[6:]}, true)
	if err != nil || wr.CommittedSize != d.SizeBytes {
		t.Fatalf("resume: %v %v", wr, err)
	}
	qs, err = c.ByteStream.QueryWriteStatus(callContext(t), &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || qs.CommittedSize != d.SizeBytes || !qs.Complete {
		t.Fatalf("after: %v %v", qs, err)
	}
}

func TestGetTree(t *testing.T) {
	_, c := startFake(t, Options{})
	leaf := marshal(t, &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: DigestOf([]byte("f"))}}})
	root := marshal(t, &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "d", Digest: DigestOf(leaf)}}})
	c.Upload(t, leaf, root)
	stream, err := c.CAS.GetTree(callContext(t), &repb.GetTreeRequest{RootDigest: DigestOf(root), PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []*repb.Directory
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, r.Directories...)
	}
	if len(dirs) != 2 || dirs[1].Files[0].Name != "f" {
		t.Fatalf("tree %v", dirs)
	}
	stream, _ = c.CAS.GetTree(callContext(t), &repb.GetTreeRequest{RootDigest: DigestOf([]byte("missing"))})
	_, err = stream.Recv()
	wantCode(t, err, codes.NotFound)
}

func TestUpdateActionResult(t *testing.T) {
	s, c := startFake(t, Options{})
	cmd, _ := proto.Marshal(&repb.Command{Arguments: []string{"clang", "-c", "a.c"}, OutputPaths: []string{"a.o"}})
	action, _ := proto.Marshal(&repb.Action{CommandDigest: DigestOf(cmd)})
	ad := DigestOf(action)
	ar := &repb.ActionResult{ExitCode: 0, OutputFiles: []*repb.OutputFile{{Path: "a.o", Digest: DigestOf([]byte("o"))}}}
	update := func() error {
		_, err := c.AC.UpdateActionResult(callContext(t), &repb.UpdateActionResultRequest{InstanceName: "i", ActionDigest: ad, ActionResult: ar})
		return err
	}
	upload := func(data []byte) {
		t.Helper()
		resp, err := c.CAS.BatchUpdateBlobs(callContext(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: DigestOf(data), Data: data}}})
		if err != nil || resp.Responses[0].Status.GetCode() != 0 {
			t.Fatalf("%v %v", resp, err)
		}
	}
	// REAPI: the client must first put the Action that produced the
	// result, and its Command, in the CAS.
	wantCode(t, update(), codes.FailedPrecondition)
	upload(action)
	wantCode(t, update(), codes.FailedPrecondition)
	upload(cmd)
	if err := update(); err != nil {
		t.Fatal(err)
	}
	got, err := c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{InstanceName: "i", ActionDigest: ad})
	if err != nil || !proto.Equal(got, ar) {
		t.Fatalf("%v %v", got, err)
	}
	// The action cache is per instance.
	_, err = c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{InstanceName: "j", ActionDigest: ad})
	wantCode(t, err, codes.NotFound)
	if st := s.Stats(); st.ACUpdates != 1 || st.ACHits != 1 || st.ACMisses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTLSAndMutualTLS(t *testing.T) {
	certs, err := NewTestCerts()
	if err != nil {
		t.Fatal(err)
	}
	files, err := certs.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := credentials.NewClientTLSFromFile(files.CACert, ""); err != nil {
		t.Fatalf("CA file unusable: %v", err)
	}
	for _, mtls := range []bool{false, true} {
		srvCfg, err := certs.ServerTLSConfig(mtls)
		if err != nil {
			t.Fatal(err)
		}
		s := NewFakeServer(Options{TLS: srvCfg})
		addr, err := s.Start(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		call := func(cfg *tls.Config, plaintext bool) error {
			var opt grpc.DialOption
			if plaintext {
				opt = grpc.WithTransportCredentials(insecure.NewCredentials())
			} else {
				opt = grpc.WithTransportCredentials(credentials.NewTLS(cfg))
			}
			c := NewClient(t, addr, opt)
			_, err := c.Capabilities.GetCapabilities(callContext(t), &repb.GetCapabilitiesRequest{})
			return err
		}
		withCert, _ := certs.ClientTLSConfig(true)
		noCert, _ := certs.ClientTLSConfig(false)
		if err := call(withCert, false); err != nil {
			t.Fatalf("mtls=%v with client cert: %v", mtls, err)
		}
		err = call(noCert, false)
		if mtls && err == nil {
			t.Fatal("mTLS server accepted a client without certificate")
		}
		if !mtls && err != nil {
			t.Fatalf("TLS without client cert: %v", err)
		}
		if err := call(nil, true); status.Code(err) != codes.Unavailable {
			t.Fatalf("plaintext to TLS server: %v", err)
		}
		if err := call(&tls.Config{MinVersion: tls.VersionTLS12}, false); err == nil {
			t.Fatal("client without the test CA trusted the server")
		}
	}
}
