package reapitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// Fault is a misbehaviour the FakeServer can be told to exhibit on the next
// calls of an RPC; see InjectFault.
type Fault int

const (
	// FaultUnavailable fails the RPC with codes.Unavailable before it runs.
	// Valid for every method.
	FaultUnavailable Fault = iota + 1

	// FaultDeadlineExceeded fails the RPC with codes.DeadlineExceeded before
	// it runs. Valid for every method.
	FaultDeadlineExceeded

	// FaultDropExecuteStream (MethodExecute only) ends the Execute stream
	// cleanly (status OK, io.EOF for the client) right after the first
	// in-progress Operation, without a done Operation. The action keeps
	// running; the client must call WaitExecution with the operation name.
	FaultDropExecuteStream

	// FaultBreakExecuteStream (MethodExecute only) is like
	// FaultDropExecuteStream but ends the stream with codes.Unavailable,
	// like a connection lost mid-stream.
	FaultBreakExecuteStream

	// FaultWrongOutputDigest (MethodExecute, MethodWaitExecution,
	// MethodGetActionResult) replaces the hash of the first output file in
	// the returned ActionResult by one whose blob is not in the CAS (same
	// size). Faulted results are never written to the action cache.
	FaultWrongOutputDigest

	// FaultMissingOutput (same methods) removes the first output file from
	// the returned ActionResult.
	FaultMissingOutput

	// FaultEscapingOutputPath (same methods) rewrites the first output
	// file's path to "../" + its base name, escaping the output root.
	FaultEscapingOutputPath

	// FaultZeroByteOutput (same methods) makes the first output file the
	// empty blob (digest of zero bytes, stored in the CAS), as if the tool
	// had produced a zero-byte object file.
	FaultZeroByteOutput

	// FaultCorruptRead (MethodRead, MethodBatchReadBlobs) returns blob
	// contents that do not match the requested digest: the first byte is
	// flipped (an empty blob is returned as one byte). With zstd the
	// corruption is applied before compression.
	FaultCorruptRead

	// FaultCorruptInline (MethodGetActionResult, with
	// Options.InlineOutputs) flips the last byte of the first inlined
	// output's contents, leaving its digest as it was. (The last byte, so
	// that an object still looks like one: only the digest tells.)
	FaultCorruptInline
)

var faultNames = map[Fault]string{
	FaultUnavailable:        "FaultUnavailable",
	FaultDeadlineExceeded:   "FaultDeadlineExceeded",
	FaultDropExecuteStream:  "FaultDropExecuteStream",
	FaultBreakExecuteStream: "FaultBreakExecuteStream",
	FaultWrongOutputDigest:  "FaultWrongOutputDigest",
	FaultMissingOutput:      "FaultMissingOutput",
	FaultEscapingOutputPath: "FaultEscapingOutputPath",
	FaultZeroByteOutput:     "FaultZeroByteOutput",
	FaultCorruptRead:        "FaultCorruptRead",
	FaultCorruptInline:      "FaultCorruptInline",
}

func (f Fault) String() string {
	if n, ok := faultNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// InjectFault makes the next n calls of method (a Method* constant) exhibit
// fault. Calls add up: injecting the same fault twice with n=1 affects two
// calls. Different faults on one method are independent and may combine on
// the same call (FaultUnavailable and FaultDeadlineExceeded are checked
// first and short-circuit the RPC).
func (s *FakeServer) InjectFault(method string, fault Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.faults[method]
	if m == nil {
		m = map[Fault]int{}
		s.faults[method] = m
	}
	m[fault] += n
}

// PendingFaults returns how many injected occurrences of fault on method have
// not fired yet; tests use it to check that a fault actually fired.
func (s *FakeServer) PendingFaults(method string, fault Fault) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults[method][fault]
}

// ClearFaults removes all pending injected faults.
func (s *FakeServer) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string]map[Fault]int{}
}

// HangAfter makes every call after the next n (of any method) hang: it
// is counted (Stats.Hung) and then waits, without an answer, until its
// client gives up or the server stops (Stats.HungEnded), as a stopped
// server process or a proxy that stopped relaying would.
func (s *FakeServer) HangAfter(n int) {
	s.hangIn.Store(int64(n))
	s.hang.Store(true)
}

// DieAfter makes the server stop after the next n calls (of any method),
// as Stop does: the listener closed and every connection reset, the calls
// in flight failing, and nothing listening at its address any more.
func (s *FakeServer) DieAfter(n int) {
	s.dieIn.Store(int64(n))
	s.die.Store(true)
}

// misbehave applies HangAfter and DieAfter to a call, in begin.
func (s *FakeServer) misbehave(ctx context.Context, method string) error {
	if s.die.Load() && s.dieIn.Add(-1) < 0 {
		go s.Stop() // Stop waits for this call
		return status.Errorf(codes.Unavailable, "reapitest: the server died on %s", method)
	}
	if s.hang.Load() && s.hangIn.Add(-1) < 0 {
		s.hung.Add(1)
		<-ctx.Done()
		s.hungEnded.Add(1)
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

func (s *FakeServer) takeFault(method string, f Fault) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.faults[method]
	if m[f] <= 0 {
		return false
	}
	m[f]--
	return true
}

// applyResultFaults applies the ActionResult faults pending for method to a
// copy of ar. It reports whether any fault fired; the returned result must
// then not be cached.
func (s *FakeServer) applyResultFaults(method string, ar *repb.ActionResult) (*repb.ActionResult, bool) {
	if ar == nil {
		return ar, false
	}
	fired := false
	out := cloneResult(ar)
	if len(out.OutputFiles) > 0 && s.takeFault(method, FaultWrongOutputDigest) {
		fired = true
		f := out.OutputFiles[0]
		h := sha256.Sum256([]byte("reapitest: wrong digest for " + f.Path + f.GetDigest().GetHash()))
		f.Digest = &repb.Digest{Hash: hex.EncodeToString(h[:]), SizeBytes: f.GetDigest().GetSizeBytes()}
	}
	if len(out.OutputFiles) > 0 && s.takeFault(method, FaultEscapingOutputPath) {
		fired = true
		f := out.OutputFiles[0]
		f.Path = "../" + baseName(f.Path)
	}
	if len(out.OutputFiles) > 0 && s.takeFault(method, FaultZeroByteOutput) {
		fired = true
		s.cas.put(nil)
		out.OutputFiles[0].Digest = DigestOf(nil)
	}
	if len(out.OutputFiles) > 0 && s.takeFault(method, FaultMissingOutput) {
		fired = true
		out.OutputFiles = out.OutputFiles[1:]
	}
	return out, fired
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

func corrupt(data []byte) []byte {
	if len(data) == 0 {
		return []byte{0}
	}
	out := append([]byte(nil), data...)
	out[0] ^= 0xff
	return out
}
