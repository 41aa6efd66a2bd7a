package reapitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// maxBlobSize bounds decompressed blobs so a corrupt zstd frame cannot make
// the test process allocate without limit.
const maxBlobSize = 1 << 30

type casStore struct {
	mu    sync.RWMutex
	blobs map[string][]byte // key: hash/size
	// packed holds the zstd form of blobs served compressed, made once per
	// blob as a server that stores blobs compressed would have it, rather
	// than on every read; a simulation fills it before the clock starts.
	packed map[string][]byte
}

func newCASStore() *casStore {
	return &casStore{blobs: map[string][]byte{}, packed: map[string][]byte{}}
}

// DigestKey names a digest as "hash/size".
func DigestKey(d *repb.Digest) string {
	return fmt.Sprintf("%s/%d", d.GetHash(), d.GetSizeBytes())
}

// DigestOf is data's SHA-256 digest.
func DigestOf(data []byte) *repb.Digest {
	h := sha256.Sum256(data)
	return &repb.Digest{Hash: hex.EncodeToString(h[:]), SizeBytes: int64(len(data))}
}

func (c *casStore) put(data []byte) *repb.Digest {
	d := DigestOf(data)
	c.mu.Lock()
	c.blobs[DigestKey(d)] = bytes.Clone(data)
	c.mu.Unlock()
	return d
}

// keep stores an uploaded blob that verify has checked against d, taking
// data over (the caller's request owns it and drops it): an upload costs
// the server no second hash and no copy, as a real server's would not.
func (c *casStore) keep(d *repb.Digest, data []byte) {
	c.mu.Lock()
	c.blobs[DigestKey(d)] = data
	c.mu.Unlock()
}

// keepRecorded stores a recorded blob, digest d, and its zstd form packed
// (nil: none made), as they are: a recording's blobs are never changed.
func (c *casStore) keepRecorded(d *repb.Digest, data, packed []byte) {
	k := DigestKey(d)
	c.mu.Lock()
	c.blobs[k] = data
	if packed != nil {
		c.packed[k] = packed
	}
	c.mu.Unlock()
}

// zstd returns the zstd form of the blob d, whose contents are data.
func (c *casStore) zstd(d *repb.Digest, data []byte) []byte {
	k := DigestKey(d)
	c.mu.RLock()
	z, ok := c.packed[k]
	c.mu.RUnlock()
	if ok {
		return z
	}
	z = ZstdCompress(data)
	c.mu.Lock()
	c.packed[k] = z
	c.mu.Unlock()
	return z
}

func (c *casStore) get(d *repb.Digest) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.blobs[DigestKey(d)]
	return b, ok
}

func (c *casStore) has(d *repb.Digest) bool {
	_, ok := c.get(d)
	return ok
}

// validDigest checks that d is a well-formed SHA256 digest.
func validDigest(d *repb.Digest) error {
	if d == nil {
		return status.Error(codes.InvalidArgument, "missing digest")
	}
	if len(d.Hash) != 64 {
		return status.Errorf(codes.InvalidArgument, "digest hash %q is not a SHA256 hex hash", d.Hash)
	}
	if _, err := hex.DecodeString(d.Hash); err != nil || d.Hash != toLowerHex(d.Hash) {
		return status.Errorf(codes.InvalidArgument, "digest hash %q is not lowercase hex", d.Hash)
	}
	if d.SizeBytes < 0 {
		return status.Errorf(codes.InvalidArgument, "negative digest size %d", d.SizeBytes)
	}
	return nil
}

func toLowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

func checkDigestFunction(f repb.DigestFunction_Value) error {
	if f != repb.DigestFunction_UNKNOWN && f != repb.DigestFunction_SHA256 {
		return status.Errorf(codes.InvalidArgument, "digest function %v not supported (SHA256 only)", f)
	}
	return nil
}

// verify checks that data matches d.
func verify(d *repb.Digest, data []byte) error {
	got := DigestOf(data)
	if got.Hash != d.GetHash() || got.SizeBytes != d.GetSizeBytes() {
		return status.Errorf(codes.InvalidArgument, "digest mismatch: declared %s, data is %s", DigestKey(d), DigestKey(got))
	}
	return nil
}

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdDec     *zstd.Decoder
)

func zstdInit() {
	zstdEncOnce.Do(func() {
		var err error
		zstdEnc, err = zstd.NewWriter(nil)
		if err != nil {
			panic(err)
		}
		zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBlobSize), zstd.WithDecoderConcurrency(0))
		if err != nil {
			panic(err)
		}
	})
}

// ZstdCompress is data compressed as the server serves it with zstd.
func ZstdCompress(data []byte) []byte {
	zstdInit()
	return zstdEnc.EncodeAll(data, nil)
}

func zstdDecompress(data []byte) ([]byte, error) {
	zstdInit()
	out, err := zstdDec.DecodeAll(data, nil)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "bad zstd data: %v", err)
	}
	return out, nil
}

// StatusOf is err as an RPC status, for a response that carries one (OK
// for nil).
func StatusOf(err error) *statuspb.Status {
	if err == nil {
		return &statuspb.Status{}
	}
	return status.Convert(err).Proto()
}

func cloneResult(ar *repb.ActionResult) *repb.ActionResult {
	return proto.Clone(ar).(*repb.ActionResult)
}

// MissingBlobsError is the FAILED_PRECONDITION error the REAPI specifies for
// Execute when inputs are absent from the CAS.
func MissingBlobsError(missing []*repb.Digest) error {
	st := status.New(codes.FailedPrecondition, "reapitest: blobs missing from CAS")
	pf := &errdetails.PreconditionFailure{}
	for _, d := range missing {
		pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
			Type:    "MISSING",
			Subject: "blobs/" + DigestKey(d),
		})
	}
	if withDetails, err := st.WithDetails(pf); err == nil {
		st = withDetails
	}
	return st.Err()
}

// checkMessageSize fails a batch of total bytes that does not fit
// Options.MaxMessageSizeBytes, as Buildbarn does.
func (s *FakeServer) checkMessageSize(verb string, total int64) error {
	if m := s.opts.MaxMessageSizeBytes; m > 0 && total > m {
		s.batchRejections.Add(1)
		return status.Errorf(codes.InvalidArgument,
			"Attempted to %s a total of at least %d bytes, while a maximum of %d bytes is permitted", verb, total, m)
	}
	return nil
}

// casService implements repb.ContentAddressableStorageServer.
type casService struct {
	repb.UnimplementedContentAddressableStorageServer // SplitBlob, SpliceBlob, chunking: Unimplemented
	s                                                 *FakeServer
}

func (c casService) FindMissingBlobs(ctx context.Context, req *repb.FindMissingBlobsRequest) (*repb.FindMissingBlobsResponse, error) {
	c.s.findMissing.Add(1)
	c.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return nil, err
	}
	resp := &repb.FindMissingBlobsResponse{}
	for _, d := range req.GetBlobDigests() {
		if err := validDigest(d); err != nil {
			return nil, err
		}
		if !c.s.cas.has(d) {
			resp.MissingBlobDigests = append(resp.MissingBlobDigests, d)
		}
	}
	return resp, nil
}

func (c casService) BatchUpdateBlobs(ctx context.Context, req *repb.BatchUpdateBlobsRequest) (*repb.BatchUpdateBlobsResponse, error) {
	c.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return nil, err
	}
	if max := c.s.opts.MaxBatchTotalSizeBytes; max > 0 {
		var total int64
		for _, r := range req.GetRequests() {
			total += r.GetDigest().GetSizeBytes()
		}
		if total > max {
			return nil, status.Errorf(codes.InvalidArgument, "batch of %d bytes exceeds max_batch_total_size_bytes %d", total, max)
		}
	}
	var total int64
	for _, r := range req.GetRequests() {
		total += r.GetDigest().GetSizeBytes()
	}
	if err := c.s.checkMessageSize("write", total); err != nil {
		return nil, err
	}
	resp := &repb.BatchUpdateBlobsResponse{}
	for _, r := range req.GetRequests() {
		err := c.updateOne(r)
		resp.Responses = append(resp.Responses, &repb.BatchUpdateBlobsResponse_Response{
			Digest: r.GetDigest(),
			Status: StatusOf(err),
		})
	}
	return resp, nil
}

func (c casService) updateOne(r *repb.BatchUpdateBlobsRequest_Request) error {
	if err := validDigest(r.GetDigest()); err != nil {
		return err
	}
	data := r.GetData()
	switch r.GetCompressor() {
	case repb.Compressor_IDENTITY:
	case repb.Compressor_ZSTD:
		if !c.s.opts.Zstd || c.s.opts.ZstdStreamOnly {
			return status.Error(codes.InvalidArgument, "zstd not enabled on this server for batches")
		}
		var err error
		if data, err = zstdDecompress(data); err != nil {
			return err
		}
	default:
		return status.Errorf(codes.InvalidArgument, "compressor %v not supported", r.GetCompressor())
	}
	if err := verify(r.GetDigest(), data); err != nil {
		return err
	}
	c.s.cas.keep(r.GetDigest(), data)
	c.s.noteUpload(UploadRecord{
		Method:     MethodBatchUpdateBlobs,
		Hash:       r.GetDigest().GetHash(),
		SizeBytes:  int64(len(data)),
		WireBytes:  int64(len(r.GetData())),
		Compressor: r.GetCompressor(),
	})
	return nil
}

func (c casService) BatchReadBlobs(ctx context.Context, req *repb.BatchReadBlobsRequest) (*repb.BatchReadBlobsResponse, error) {
	c.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return nil, err
	}
	if max := c.s.opts.MaxBatchTotalSizeBytes; max > 0 {
		var total int64
		for _, d := range req.GetDigests() {
			total += d.GetSizeBytes()
		}
		if total > max {
			return nil, status.Errorf(codes.InvalidArgument, "batch of %d bytes exceeds max_batch_total_size_bytes %d", total, max)
		}
	}
	var total int64
	for _, d := range req.GetDigests() {
		total += d.GetSizeBytes()
	}
	if err := c.s.checkMessageSize("read", total); err != nil {
		return nil, err
	}
	useZstd := false
	if c.s.opts.Zstd && !c.s.opts.ZstdStreamOnly {
		for _, comp := range req.GetAcceptableCompressors() {
			if comp == repb.Compressor_ZSTD {
				useZstd = true
			}
		}
	}
	corruptThis := c.s.takeFault(MethodBatchReadBlobs, FaultCorruptRead)
	resp := &repb.BatchReadBlobsResponse{}
	for _, d := range req.GetDigests() {
		r := &repb.BatchReadBlobsResponse_Response{Digest: d}
		resp.Responses = append(resp.Responses, r)
		if err := validDigest(d); err != nil {
			r.Status = StatusOf(err)
			continue
		}
		data, ok := c.s.cas.get(d)
		if !ok {
			r.Status = StatusOf(status.Errorf(codes.NotFound, "blob %s not found", DigestKey(d)))
			continue
		}
		c.s.blobsRead.Add(1)
		c.s.bytesReadRaw.Add(int64(len(data)))
		if corruptThis {
			data = corrupt(data)
		}
		r.Status = StatusOf(nil)
		if useZstd {
			c.s.blobsReadZstd.Add(1)
		}
		switch {
		case useZstd && corruptThis:
			r.Compressor = repb.Compressor_ZSTD
			r.Data = ZstdCompress(data)
		case useZstd:
			r.Compressor = repb.Compressor_ZSTD
			r.Data = c.s.cas.zstd(d, data)
		default:
			r.Data = append([]byte(nil), data...)
		}
	}
	return resp, nil
}

func (c casService) GetTree(req *repb.GetTreeRequest, stream grpc.ServerStreamingServer[repb.GetTreeResponse]) error {
	c.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return err
	}
	if req.GetPageToken() != "" {
		return status.Error(codes.InvalidArgument, "reapitest: GetTree returns everything at once; page tokens are not supported")
	}
	if err := validDigest(req.GetRootDigest()); err != nil {
		return err
	}
	pageSize := int(req.GetPageSize())
	if pageSize <= 0 {
		pageSize = 1000
	}
	queue := []*repb.Digest{req.GetRootDigest()}
	seen := map[string]bool{}
	var page []*repb.Directory
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[DigestKey(d)] {
			continue
		}
		seen[DigestKey(d)] = true
		dir, err := c.s.getDirectory(d)
		if err != nil {
			if len(seen) == 1 {
				return status.Errorf(codes.NotFound, "root directory %s not found", DigestKey(d))
			}
			continue // the spec lets GetTree omit missing subtrees
		}
		page = append(page, dir)
		for _, sub := range dir.GetDirectories() {
			queue = append(queue, sub.GetDigest())
		}
		if len(page) == pageSize {
			if err := stream.Send(&repb.GetTreeResponse{Directories: page}); err != nil {
				return err
			}
			page = nil
		}
	}
	if len(page) > 0 {
		return stream.Send(&repb.GetTreeResponse{Directories: page})
	}
	return nil
}

func (s *FakeServer) getDirectory(d *repb.Digest) (*repb.Directory, error) {
	data, ok := s.cas.get(d)
	if !ok {
		return nil, MissingBlobsError([]*repb.Digest{d})
	}
	dir := &repb.Directory{}
	if err := proto.Unmarshal(data, dir); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "blob %s is not a Directory: %v", DigestKey(d), err)
	}
	return dir, nil
}
