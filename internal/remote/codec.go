package remote

import (
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// codec is the connection's gRPC codec: gRPC's own protobuf codec, except
// that a BatchUpdateBlobsRequest is framed around its blobs instead of
// copied. gRPC's codec marshals the whole request into one buffer (zeroed
// by its pool) before the transport copies it again into its frames; here
// the message is the protobuf framing interleaved with the blobs' own
// memory (the buffers files were read into), and the transport copies
// each uploaded byte once. The bytes on the wire are those proto.Marshal
// gives. Megabytes go up per action in a C++ project with debug
// information.
type codec struct{ proto encoding.CodecV2 }

var _ encoding.CodecV2 = codec{}

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

// Name is gRPC's, so the content type stays application/grpc+proto.
func (c codec) Name() string { return c.proto.Name() }

// framedBlobMin is the smallest blob referenced rather than copied into the
// framing: below it, one more buffer in the message costs more than the
// copy saves.
const framedBlobMin = 4 << 10

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if req, ok := v.(*repb.BatchUpdateBlobsRequest); ok {
		return marshalBatchUpdate(req), nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// marshalBatchUpdate encodes req as proto.Marshal does (fields in number
// order, zero values left out), with each blob of framedBlobMin bytes or
// more a buffer of its own in the result rather than a copy. The blobs
// must stay unchanged until the call returns.
func marshalBatchUpdate(req *repb.BatchUpdateBlobsRequest) mem.BufferSlice {
	var out mem.BufferSlice
	// The framing goes into one buffer, sized for the common case; the
	// message is its segments between the blobs it does not copy (a
	// segment keeps its bytes if b grows: append moves only what comes
	// after it).
	framing := 64
	for _, r := range req.GetRequests() {
		framing += 96
		if len(r.GetData()) < framedBlobMin {
			framing += len(r.GetData())
		}
	}
	b := make([]byte, 0, framing)
	mark := 0
	if name := req.GetInstanceName(); name != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	for _, r := range req.GetRequests() {
		d, data, comp := r.GetDigest(), r.GetData(), r.GetCompressor()
		n := 0
		if d != nil {
			n += protowire.SizeTag(1) + protowire.SizeBytes(sizeDigest(d))
		}
		if len(data) > 0 {
			n += protowire.SizeTag(2) + protowire.SizeBytes(len(data))
		}
		if comp != 0 {
			n += protowire.SizeTag(3) + protowire.SizeVarint(uint64(comp))
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		if d != nil {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeDigest(d)))
			b = appendDigest(b, d)
		}
		if len(data) > 0 {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(len(data)))
			if len(data) < framedBlobMin {
				b = append(b, data...)
			} else {
				out = append(out, mem.SliceBuffer(b[mark:len(b):len(b)]), mem.SliceBuffer(data))
				mark = len(b)
			}
		}
		if comp != 0 {
			b = protowire.AppendTag(b, 3, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(comp))
		}
	}
	if f := req.GetDigestFunction(); f != 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(f))
	}
	if len(b) > mark {
		out = append(out, mem.SliceBuffer(b[mark:]))
	}
	return out
}

// sizeDigest is the encoded size of d.
func sizeDigest(d *repb.Digest) int {
	n := 0
	if h := d.GetHash(); h != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(h))
	}
	if s := d.GetSizeBytes(); s != 0 {
		n += protowire.SizeTag(2) + protowire.SizeVarint(uint64(s))
	}
	return n
}

// appendDigest appends d's fields (not its own tag and length).
func appendDigest(b []byte, d *repb.Digest) []byte {
	if h := d.GetHash(); h != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, h)
	}
	if s := d.GetSizeBytes(); s != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(s))
	}
	return b
}
