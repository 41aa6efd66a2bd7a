package reapitest

// What the server records: its calls, the blobs uploaded, the instance
// names used, and its counters.

import (
	"slices"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/metadata"
)

// CallRecord is one RPC as seen by the server.
type CallRecord struct {
	Method   string      // full method name, e.g. MethodExecute
	Metadata metadata.MD // incoming headers (a copy)
}

// UploadRecord describes one blob write accepted into the CAS.
type UploadRecord struct {
	Method     string // MethodBatchUpdateBlobs or MethodWrite
	Hash       string
	SizeBytes  int64 // uncompressed (raw) size
	WireBytes  int64 // bytes received, compressed if Compressor is ZSTD
	Compressor repb.Compressor_Value
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Executions            int64 // actions actually run (cache misses that executed)
	ExecuteCalls          int64 // Execute RPCs, including rejected ones
	WaitExecutionCalls    int64
	ExecuteRejections     int64 // Execute calls rejected for platform mismatch
	BatchRejections       int64 // batch calls refused by Options.MaxMessageSizeBytes
	ACHits                int64 // GetActionResult hits + Execute cache hits
	ACMisses              int64 // GetActionResult misses + Execute cache-lookup misses
	ACUpdates             int64 // UpdateActionResult calls that stored a result
	FindMissingBlobsCalls int64
	BlobsUploaded         int64 // blobs received via BatchUpdateBlobs or ByteStream Write
	BytesUploadedRaw      int64 // their uncompressed size
	BytesUploadedWire     int64 // their size as sent (compressed when zstd)
	BlobsRead             int64 // blobs served via BatchReadBlobs or ByteStream Read
	BytesReadRaw          int64 // uncompressed bytes served
	BlobsReadZstd         int64 // of BlobsRead: served compressed
	// Cancellations counts Execute and WaitExecution streams that the
	// client cancelled before their operation finished. The server then
	// cancels the execution (as Buildbarn drops an operation nobody
	// waits for).
	Cancellations int64
	// CancelledAfterDone counts streams the client cancelled after their
	// finished operation but before the handler returned
	// (Options.LingerAfterDone).
	CancelledAfterDone int64
	// Hung counts the calls that hung (HangAfter), HungEnded those of
	// them whose client gave up (or that the server's stop ended).
	Hung, HungEnded int64
	RPCs            map[string]int64 // per full method name
}

// Stats returns a snapshot of all counters.
func (s *FakeServer) Stats() Stats {
	st := Stats{
		Executions:            s.executions.Load(),
		ExecuteCalls:          s.executeCalls.Load(),
		WaitExecutionCalls:    s.waitCalls.Load(),
		ExecuteRejections:     s.execRejections.Load(),
		BatchRejections:       s.batchRejections.Load(),
		ACHits:                s.acHits.Load(),
		ACMisses:              s.acMisses.Load(),
		ACUpdates:             s.acUpdates.Load(),
		FindMissingBlobsCalls: s.findMissing.Load(),
		BlobsUploaded:         s.blobsUploaded.Load(),
		BytesUploadedRaw:      s.bytesRaw.Load(),
		BytesUploadedWire:     s.bytesWire.Load(),
		BlobsRead:             s.blobsRead.Load(),
		BytesReadRaw:          s.bytesReadRaw.Load(),
		BlobsReadZstd:         s.blobsReadZstd.Load(),
		Cancellations:         s.cancellations.Load(),
		CancelledAfterDone:    s.lateCancels.Load(),
		Hung:                  s.hung.Load(),
		HungEnded:             s.hungEnded.Load(),
		RPCs:                  map[string]int64{},
	}
	s.mu.Lock()
	for k, v := range s.rpcs {
		st.RPCs[k] = v
	}
	s.mu.Unlock()
	return st
}

// Calls returns every RPC received so far, in arrival order.
func (s *FakeServer) Calls() []CallRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CallRecord, len(s.calls))
	for i, c := range s.calls {
		out[i] = CallRecord{Method: c.Method, Metadata: c.Metadata.Copy()}
	}
	return out
}

// HeaderValues returns all values of header key (case-insensitive) seen on
// any RPC, in arrival order.
func (s *FakeServer) HeaderValues(key string) []string {
	var out []string
	for _, c := range s.Calls() {
		out = append(out, c.Metadata.Get(key)...)
	}
	return out
}

// InstanceNames returns the distinct instance names seen in requests and
// ByteStream resource names, in first-seen order ("" is the default
// instance).
// ExecutePriorities returns the ExecutionPolicy priority of every Execute
// request, in the order they came.
func (s *FakeServer) ExecutePriorities() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.priorities)
}

func (s *FakeServer) InstanceNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inst...)
}

// Uploads returns one record per blob write accepted into the CAS.
func (s *FakeServer) Uploads() []UploadRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]UploadRecord(nil), s.uploads...)
}

// ResetStats zeroes all counters and forgets recorded calls, uploads and
// instance names. Stored blobs and action results are kept.
func (s *FakeServer) ResetStats() {
	for _, c := range []*atomic.Int64{&s.executions, &s.executeCalls, &s.waitCalls,
		&s.execRejections, &s.acHits, &s.acMisses, &s.acUpdates, &s.findMissing,
		&s.blobsUploaded, &s.bytesRaw, &s.bytesWire, &s.blobsRead, &s.bytesReadRaw, &s.blobsReadZstd, &s.batchRejections, &s.cancellations, &s.lateCancels, &s.hung, &s.hungEnded} {
		c.Store(0)
	}
	s.mu.Lock()
	s.calls = nil
	s.priorities = nil
	s.inst = nil
	s.instSeen = map[string]bool{}
	s.uploads = nil
	s.rpcs = map[string]int64{}
	s.mu.Unlock()
}

// noteInstance records an instance name the first time a call uses it.
func (s *FakeServer) noteInstance(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.instSeen[name] {
		s.instSeen[name] = true
		s.inst = append(s.inst, name)
	}
}

// noteUpload counts a blob written into the CAS and records it.
func (s *FakeServer) noteUpload(r UploadRecord) {
	s.blobsUploaded.Add(1)
	s.bytesRaw.Add(r.SizeBytes)
	s.bytesWire.Add(r.WireBytes)
	s.mu.Lock()
	s.uploads = append(s.uploads, r)
	s.mu.Unlock()
}
