package reapitest

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const readChunkSize = 64 * 1024

// resource is a parsed ByteStream resource name.
type resource struct {
	instance   string
	compressed bool // compressed-blobs/zstd form
	digest     *repb.Digest
}

// parseResource parses "{instance}/blobs/..." (upload=false) or
// "{instance}/uploads/{uuid}/blobs/..." (upload=true), with "blobs" possibly
// replaced by "compressed-blobs/zstd".
func parseResource(name string, upload bool) (resource, error) {
	bad := func(why string) (resource, error) {
		return resource{}, status.Errorf(codes.InvalidArgument, "bad resource name %q: %s", name, why)
	}
	segs := strings.Split(name, "/")
	i := 0
	if upload {
		for i < len(segs) && segs[i] != "uploads" {
			i++
		}
		if i+2 >= len(segs) {
			return bad("want {instance}/uploads/{uuid}/blobs/{hash}/{size}")
		}
		if segs[i+1] == "" {
			return bad("empty uuid")
		}
		i += 2
	} else {
		for i < len(segs) && segs[i] != "blobs" && segs[i] != "compressed-blobs" {
			i++
		}
		if i >= len(segs) {
			return bad("want {instance}/blobs/{hash}/{size}")
		}
	}
	var r resource
	if upload {
		end := i - 2
		r.instance = strings.Join(segs[:end], "/")
	} else {
		r.instance = strings.Join(segs[:i], "/")
	}
	rest := segs[i:]
	switch {
	case len(rest) > 0 && rest[0] == "blobs":
		rest = rest[1:]
	case len(rest) > 1 && rest[0] == "compressed-blobs":
		if rest[1] != "zstd" {
			return bad("unsupported compressor " + rest[1])
		}
		r.compressed = true
		rest = rest[2:]
	default:
		return bad("missing blobs or compressed-blobs/{compressor}")
	}
	if len(rest) > 0 && rest[0] == "sha256" {
		rest = rest[1:]
	}
	if len(rest) < 2 {
		return bad("missing hash/size")
	}
	size, err := strconv.ParseInt(rest[1], 10, 64)
	if err != nil {
		return bad("size is not a number")
	}
	r.digest = &repb.Digest{Hash: rest[0], SizeBytes: size}
	if err := validDigest(r.digest); err != nil {
		return resource{}, err
	}
	// Anything after the size is optional metadata, ignored.
	return r, nil
}

// partialWrite is an unfinished ByteStream upload that can be resumed.
type partialWrite struct {
	data []byte // bytes as received (compressed for compressed-blobs)
}

// byteStreamService implements bspb.ByteStreamServer.
type byteStreamService struct {
	bspb.UnimplementedByteStreamServer
	s *FakeServer
}

func (b byteStreamService) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	r, err := parseResource(req.GetResourceName(), false)
	if err != nil {
		return err
	}
	b.s.noteInstance(r.instance)
	if r.compressed && !b.s.opts.Zstd {
		return status.Error(codes.InvalidArgument, "zstd not enabled on this server")
	}
	if req.GetReadOffset() < 0 || req.GetReadLimit() < 0 {
		return status.Error(codes.OutOfRange, "negative read_offset or read_limit")
	}
	if r.compressed && req.GetReadLimit() != 0 {
		return status.Error(codes.InvalidArgument, "read_limit must be 0 for compressed-blobs")
	}
	data, ok := b.s.cas.get(r.digest)
	if !ok {
		return status.Errorf(codes.NotFound, "blob %s not found", DigestKey(r.digest))
	}
	b.s.blobsRead.Add(1)
	b.s.bytesReadRaw.Add(int64(len(data)))
	corrupted := b.s.takeFault(MethodRead, FaultCorruptRead)
	if corrupted {
		data = corrupt(data)
	}
	if req.GetReadOffset() > int64(len(data)) {
		return status.Errorf(codes.OutOfRange, "read_offset %d beyond blob size %d", req.GetReadOffset(), len(data))
	}
	whole := req.GetReadOffset() == 0 && (req.GetReadLimit() <= 0 || req.GetReadLimit() >= int64(len(data)))
	data = data[req.GetReadOffset():]
	if l := req.GetReadLimit(); l > 0 && l < int64(len(data)) {
		data = data[:l]
	}
	if r.compressed {
		b.s.blobsReadZstd.Add(1)
	}
	switch {
	case r.compressed && whole && !corrupted:
		data = b.s.cas.zstd(r.digest, data)
	case r.compressed:
		data = ZstdCompress(data)
	}
	for len(data) > 0 {
		n := min(len(data), readChunkSize)
		if err := stream.Send(&bspb.ReadResponse{Data: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func (b byteStreamService) Write(stream bspb.ByteStream_WriteServer) error {
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "empty Write stream")
		}
		return err
	}
	name := first.GetResourceName()
	r, err := parseResource(name, true)
	if err != nil {
		return err
	}
	b.s.noteInstance(r.instance)
	if r.compressed && !b.s.opts.Zstd {
		return status.Error(codes.InvalidArgument, "zstd not enabled on this server")
	}

	// Resume a partial upload of the same resource name, or start afresh.
	var buf []byte
	b.s.mu.Lock()
	p := b.s.partials[name]
	delete(b.s.partials, name)
	b.s.mu.Unlock()
	switch off := first.GetWriteOffset(); {
	case off == 0:
	case p != nil && off == int64(len(p.data)):
		buf = p.data
	default:
		return status.Errorf(codes.InvalidArgument, "write_offset %d does not match committed size", off)
	}

	req := first
	for {
		if req.GetWriteOffset() != int64(len(buf)) {
			return status.Errorf(codes.InvalidArgument, "write_offset %d, expected %d", req.GetWriteOffset(), len(buf))
		}
		if req != first && req.GetResourceName() != "" && req.GetResourceName() != name {
			return status.Error(codes.InvalidArgument, "resource_name changed within Write stream")
		}
		buf = append(buf, req.GetData()...)
		if !r.compressed && int64(len(buf)) > r.digest.SizeBytes {
			return status.Errorf(codes.InvalidArgument, "received %d bytes for a blob of %d bytes", len(buf), r.digest.SizeBytes)
		}
		if req.GetFinishWrite() {
			break
		}
		req, err = stream.Recv()
		if err != nil {
			// Client went away or half-closed without finish_write: keep the
			// bytes so that QueryWriteStatus and a resumed Write see them.
			b.s.mu.Lock()
			b.s.partials[name] = &partialWrite{data: buf}
			b.s.mu.Unlock()
			if errors.Is(err, io.EOF) {
				return status.Error(codes.InvalidArgument, "Write stream ended without finish_write")
			}
			return err
		}
	}

	data := buf
	comp := repb.Compressor_IDENTITY
	if r.compressed {
		comp = repb.Compressor_ZSTD
		if data, err = zstdDecompress(buf); err != nil {
			return err
		}
	}
	if err := verify(r.digest, data); err != nil {
		return err
	}
	b.s.cas.keep(r.digest, data)
	b.s.noteUpload(UploadRecord{
		Method:     MethodWrite,
		Hash:       r.digest.Hash,
		SizeBytes:  int64(len(data)),
		WireBytes:  int64(len(buf)),
		Compressor: comp,
	})
	// committed_size is the number of bytes received, i.e. the blob size
	// for blobs/ and the compressed length for compressed-blobs/.
	return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: int64(len(buf))})
}

func (b byteStreamService) QueryWriteStatus(ctx context.Context, req *bspb.QueryWriteStatusRequest) (*bspb.QueryWriteStatusResponse, error) {
	name := req.GetResourceName()
	r, err := parseResource(name, true)
	if err != nil {
		return nil, err
	}
	b.s.noteInstance(r.instance)
	if b.s.cas.has(r.digest) {
		size := r.digest.SizeBytes
		if r.compressed {
			size = -1
		}
		return &bspb.QueryWriteStatusResponse{CommittedSize: size, Complete: true}, nil
	}
	b.s.mu.Lock()
	p := b.s.partials[name]
	b.s.mu.Unlock()
	if p == nil {
		return &bspb.QueryWriteStatusResponse{}, nil
	}
	return &bspb.QueryWriteStatusResponse{CommittedSize: int64(len(p.data))}, nil
}
