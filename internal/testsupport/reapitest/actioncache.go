package reapitest

import (
	"context"
	"google.golang.org/protobuf/proto"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// acStore is the action cache, keyed by instance name and action digest.
type acStore struct {
	mu      sync.Mutex
	results map[string]*repb.ActionResult
}

func newACStore() *acStore { return &acStore{results: map[string]*repb.ActionResult{}} }

func acKey(instance string, d *repb.Digest) string { return instance + "\x00" + DigestKey(d) }

func (a *acStore) get(instance string, d *repb.Digest) (*repb.ActionResult, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.results[acKey(instance, d)]
	if !ok {
		return nil, false
	}
	return cloneResult(r), true
}

func (a *acStore) put(instance string, d *repb.Digest, r *repb.ActionResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.results[acKey(instance, d)] = cloneResult(r)
}

// ActionResult returns the cached result for actionDigest under instance,
// for tests that want to inspect the cache directly.
func (s *FakeServer) ActionResult(instance string, actionDigest *repb.Digest) (*repb.ActionResult, bool) {
	return s.ac.get(instance, actionDigest)
}

// PutBlob stores data in the CAS directly (bypassing the RPC counters) and
// returns its digest.
func (s *FakeServer) PutBlob(data []byte) *repb.Digest { return s.cas.put(data) }

// Evict removes the blob with digest d from the CAS, as a server's
// eviction would.
func (s *FakeServer) Evict(d *repb.Digest) {
	s.cas.mu.Lock()
	delete(s.cas.blobs, DigestKey(d))
	delete(s.cas.packed, DigestKey(d))
	s.cas.mu.Unlock()
}

// Blob returns a copy of the CAS blob with digest d.
func (s *FakeServer) Blob(d *repb.Digest) ([]byte, bool) {
	b, ok := s.cas.get(d)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

// acService implements repb.ActionCacheServer.
type acService struct {
	repb.UnimplementedActionCacheServer
	s *FakeServer
}

func (a acService) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	a.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return nil, err
	}
	if err := validDigest(req.GetActionDigest()); err != nil {
		return nil, err
	}
	r, ok := a.s.ac.get(req.GetInstanceName(), req.GetActionDigest())
	if !ok {
		a.s.acMisses.Add(1)
		return nil, status.Errorf(codes.NotFound, "no action result for %s", DigestKey(req.GetActionDigest()))
	}
	a.s.acHits.Add(1)
	r, _ = a.s.applyResultFaults(MethodGetActionResult, r)
	if a.s.inlineOutputs.Load() {
		a.s.inline(MethodGetActionResult, r, req.GetInlineOutputFiles(), req.GetInlineStdout(), req.GetInlineStderr())
	}
	return r, nil
}

// maxInline bounds the contents GetActionResult inlines in one result.
const maxInline = 1 << 20

// inline fills in the contents of r's output files that paths lists and
// the CAS holds, and its stdout and stderr if asked, up to maxInline bytes
// in all. FaultCorruptInline on method corrupts the first output inlined.
func (s *FakeServer) inline(method string, r *repb.ActionResult, paths []string, stdout, stderr bool) {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	total, first := int64(0), true
	for _, f := range r.OutputFiles {
		if !want[f.Path] || total+f.GetDigest().GetSizeBytes() > maxInline {
			continue
		}
		data, ok := s.cas.get(f.GetDigest())
		if !ok {
			continue
		}
		total += int64(len(data))
		f.Contents = append([]byte(nil), data...)
		if first && s.takeFault(method, FaultCorruptInline) {
			if n := len(f.Contents); n > 0 {
				f.Contents[n-1] ^= 0xff
			}
		}
		first = false
	}
	std := func(d *repb.Digest) []byte {
		if d.GetSizeBytes() == 0 || total+d.GetSizeBytes() > maxInline {
			return nil
		}
		data, ok := s.cas.get(d)
		if !ok {
			return nil
		}
		total += int64(len(data))
		return append([]byte(nil), data...)
	}
	if stdout && r.StdoutRaw == nil {
		r.StdoutRaw = std(r.StdoutDigest)
	}
	if stderr && r.StderrRaw == nil {
		r.StderrRaw = std(r.StderrDigest)
	}
}

func (a acService) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	a.s.noteInstance(req.GetInstanceName())
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return nil, err
	}
	if err := validDigest(req.GetActionDigest()); err != nil {
		return nil, err
	}
	if req.GetActionResult() == nil {
		return nil, status.Error(codes.InvalidArgument, "missing action_result")
	}
	if a.s.opts.ACUpdateDisabled {
		return nil, status.Error(codes.PermissionDenied, "reapitest: clients may not write the action cache")
	}
	if err := a.s.producedBy(req.GetActionDigest()); err != nil {
		return nil, err
	}
	a.s.ac.put(req.GetInstanceName(), req.GetActionDigest(), req.GetActionResult())
	a.s.acUpdates.Add(1)
	return req.GetActionResult(), nil
}

// producedBy checks what REAPI asks of a client that writes the
// ActionCache: it "MUST first upload the Action that produced the result,
// along with its Command, into the ContentAddressableStorage" (a server may
// control access by the kind of action, or show what produced a result).
// This double refuses an update without them, as a strict server may.
func (s *FakeServer) producedBy(action *repb.Digest) error {
	data, ok := s.cas.get(action)
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "reapitest: the Action %s/%d is not in the CAS: a client must upload it, and its Command, before UpdateActionResult",
			action.GetHash(), action.GetSizeBytes())
	}
	var act repb.Action
	if err := proto.Unmarshal(data, &act); err != nil {
		return status.Errorf(codes.InvalidArgument, "reapitest: the blob %s is not an Action: %v", action.GetHash(), err)
	}
	if _, ok := s.cas.get(act.GetCommandDigest()); !ok {
		return status.Errorf(codes.FailedPrecondition, "reapitest: the Command %s of Action %s is not in the CAS: a client must upload it before UpdateActionResult",
			act.GetCommandDigest().GetHash(), action.GetHash())
	}
	return nil
}
