package remote

import (
	"bytes"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"
)

// TestCodecBatchUpdateAsProto: the framed BatchUpdateBlobsRequest is, byte
// for byte, what proto.Marshal gives, and the large blobs are not copied.
func TestCodecBatchUpdateAsProto(t *testing.T) {
	big := bytes.Repeat([]byte("bitcode!"), 3000) // 24,000 bytes: referenced
	cases := map[string]*repb.BatchUpdateBlobsRequest{
		"empty":         {},
		"instance only": {InstanceName: "main"},
		"small blobs": {InstanceName: "ci/linux", DigestFunction: repb.DigestFunction_SHA256, Requests: []*repb.BatchUpdateBlobsRequest_Request{
			{Digest: &repb.Digest{Hash: strings.Repeat("a", 64), SizeBytes: 3}, Data: []byte("abc")},
			{Digest: &repb.Digest{Hash: strings.Repeat("b", 64)}},
			{Digest: &repb.Digest{Hash: strings.Repeat("c", 64), SizeBytes: 5}, Data: []byte("zstd!"), Compressor: repb.Compressor_ZSTD},
		}},
		"large and small": {DigestFunction: repb.DigestFunction_SHA256, Requests: []*repb.BatchUpdateBlobsRequest_Request{
			{Digest: &repb.Digest{Hash: strings.Repeat("d", 64), SizeBytes: int64(len(big))}, Data: big},
			{Digest: &repb.Digest{Hash: strings.Repeat("e", 64), SizeBytes: 1}, Data: []byte("x")},
			{Digest: &repb.Digest{Hash: strings.Repeat("f", 64), SizeBytes: int64(len(big))}, Data: big, Compressor: repb.Compressor_ZSTD},
			{Digest: &repb.Digest{Hash: strings.Repeat("0", 64), SizeBytes: int64(len(big))}, Data: big},
		}},
		"odd values": {InstanceName: "x", Requests: []*repb.BatchUpdateBlobsRequest_Request{
			{Digest: &repb.Digest{SizeBytes: -1}, Compressor: -2},
			{},
		}},
	}
	c := newCodec()
	for name, req := range cases {
		want, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Marshal(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m := got.Materialize(); !bytes.Equal(m, want) {
			t.Errorf("%s: encoded\n%x\nwant\n%x", name, m, want)
		}
		// Each large blob is a buffer of the message, the blob's own memory.
		referenced := 0
		for _, b := range got {
			if d := b.ReadOnlyData(); len(d) > 0 && &d[0] == &big[0] {
				referenced++
			}
		}
		if name == "large and small" && referenced != 3 {
			t.Errorf("%s: %d large blobs referenced, want 3", name, referenced)
		}
		var back repb.BatchUpdateBlobsRequest
		if err := c.Unmarshal(got, &back); err != nil || !proto.Equal(&back, req) {
			t.Errorf("%s: does not decode to the request (%v)", name, err)
		}
	}
}

// TestCodecOtherMessages: every other message is protobuf, small or large.
func TestCodecOtherMessages(t *testing.T) {
	c := newCodec()
	for _, m := range []proto.Message{
		&repb.FindMissingBlobsRequest{InstanceName: "i", BlobDigests: []*repb.Digest{{Hash: "h", SizeBytes: 1}}},
		&repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{{Data: bytes.Repeat([]byte{7}, 1<<20)}}},
	} {
		got, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(m)
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("%T: not proto.Marshal's bytes", m)
		}
		back := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(got, back); err != nil || !proto.Equal(back, m) {
			t.Errorf("%T: does not decode to the message (%v)", m, err)
		}
		got.Free()
	}
	if _, err := c.Marshal(42); err == nil {
		t.Error("marshalled a non-message")
	}
}

func BenchmarkBatchUpdateMarshal(b *testing.B) {
	blob := bytes.Repeat([]byte{1}, 256<<10)
	req := &repb.BatchUpdateBlobsRequest{DigestFunction: repb.DigestFunction_SHA256}
	for i := range 16 {
		req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{
			Digest: &repb.Digest{Hash: strings.Repeat(string(rune('a'+i)), 64), SizeBytes: int64(len(blob))}, Data: blob})
	}
	b.Run("framed", func(b *testing.B) {
		c := newCodec()
		b.SetBytes(4 << 20)
		for range b.N {
			s, _ := c.Marshal(req)
			s.Free()
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.SetBytes(4 << 20)
		for range b.N {
			proto.Marshal(req)
		}
	})
}
