package reapitest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestFaultUnavailableAndDeadlineExceeded(t *testing.T) {
	s, c := startFake(t, Options{})
	s.InjectFault(MethodFindMissingBlobs, FaultUnavailable, 2)
	s.InjectFault(MethodGetCapabilities, FaultDeadlineExceeded, 1)
	req := &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{DigestOf([]byte("x"))}}
	for i := 0; i < 2; i++ {
		_, err := c.CAS.FindMissingBlobs(callContext(t), req)
		wantCode(t, err, codes.Unavailable)
	}
	resp, err := c.CAS.FindMissingBlobs(callContext(t), req)
	if err != nil || len(resp.MissingBlobDigests) != 1 {
		t.Fatalf("third call: %v %v", resp, err)
	}
	_, err = c.Capabilities.GetCapabilities(callContext(t), &repb.GetCapabilitiesRequest{})
	wantCode(t, err, codes.DeadlineExceeded)
	if _, err := c.Capabilities.GetCapabilities(callContext(t), &repb.GetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	if s.PendingFaults(MethodFindMissingBlobs, FaultUnavailable) != 0 {
		t.Fatal("fault not consumed")
	}
	st := s.Stats()
	if st.FindMissingBlobsCalls != 1 || st.RPCs[MethodFindMissingBlobs] != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFaultUnavailableOnStreamingRPC(t *testing.T) {
	needTools(t, "/bin/cp")
	s, c := startFake(t, Options{})
	ad := copyAction().Build(t, c)
	s.InjectFault(MethodExecute, FaultUnavailable, 1)
	stream, err := c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: ad})
	if err == nil {
		_, err = Drain(stream)
	}
	wantCode(t, err, codes.Unavailable)
	if s.Stats().Executions != 0 {
		t.Fatal("action ran despite Unavailable")
	}
	if res := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).Result; res.ExitCode != 0 {
		t.Fatalf("retry failed: %v", res)
	}
}

func TestFaultDroppedAndBrokenExecuteStream(t *testing.T) {
	needTools(t, "/bin/cp")
	for _, tc := range []struct {
		fault   Fault
		wantErr codes.Code
	}{
		{FaultDropExecuteStream, codes.OK},
		{FaultBreakExecuteStream, codes.Unavailable},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			s, c := startFake(t, Options{})
			ad := copyAction().Build(t, c)
			s.InjectFault(MethodExecute, tc.fault, 1)
			stream, err := c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: ad})
			if err != nil {
				t.Fatal(err)
			}
			ops, err := Drain(stream)
			if status.Code(err) != tc.wantErr {
				t.Fatalf("stream error %v, want %v", err, tc.wantErr)
			}
			if len(ops) != 1 || ops[0].Done || ops[0].Name == "" {
				t.Fatalf("want exactly one in-progress operation, got %v", ops)
			}
			md := &repb.ExecuteOperationMetadata{}
			if err := ops[0].Metadata.UnmarshalTo(md); err != nil || md.Stage != repb.ExecutionStage_QUEUED {
				t.Fatalf("metadata %v %v", md, err)
			}
			w, err := c.Exec.WaitExecution(callContext(t), &repb.WaitExecutionRequest{Name: ops[0].Name})
			if err != nil {
				t.Fatal(err)
			}
			wops, err := Drain(w)
			if err != nil || len(wops) == 0 {
				t.Fatalf("WaitExecution: %v %v", wops, err)
			}
			res := Response(t, wops[len(wops)-1]).Result
			if res.ExitCode != 0 || len(res.OutputFiles) != 1 {
				t.Fatalf("result %v", res)
			}
			if st := s.Stats(); st.WaitExecutionCalls != 1 || st.Executions != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestFaultResultCorruptions(t *testing.T) {
	needTools(t, "/bin/cp")
	emptyHash := sha256.Sum256(nil)
	for _, tc := range []struct {
		fault Fault
		check func(t *testing.T, c *Client, good, got *repb.ActionResult)
	}{
		{FaultWrongOutputDigest, func(t *testing.T, c *Client, good, got *repb.ActionResult) {
			d := got.OutputFiles[0].Digest
			if d.Hash == good.OutputFiles[0].Digest.Hash {
				t.Fatal("digest unchanged")
			}
			_, err := c.read(t, "blobs/"+d.Hash+"/"+itoa(d.SizeBytes))
			wantCode(t, err, codes.NotFound)
		}},
		{FaultMissingOutput, func(t *testing.T, c *Client, good, got *repb.ActionResult) {
			if len(got.OutputFiles) != 0 {
				t.Fatalf("outputs %v", got.OutputFiles)
			}
		}},
		{FaultEscapingOutputPath, func(t *testing.T, c *Client, good, got *repb.ActionResult) {
			if got.OutputFiles[0].Path != "../x.txt" {
				t.Fatalf("path %q", got.OutputFiles[0].Path)
			}
		}},
		{FaultZeroByteOutput, func(t *testing.T, c *Client, good, got *repb.ActionResult) {
			d := got.OutputFiles[0].Digest
			if d.SizeBytes != 0 || d.Hash != hex.EncodeToString(emptyHash[:]) {
				t.Fatalf("digest %v", d)
			}
			if data, err := c.read(t, "blobs/"+d.Hash+"/0"); err != nil || len(data) != 0 {
				t.Fatalf("empty blob: %q %v", data, err)
			}
		}},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			s, c := startFake(t, Options{})
			ad := copyAction().Build(t, c)
			s.InjectFault(MethodExecute, tc.fault, 1)
			got := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).Result
			// The action cache keeps the true result.
			good, err := c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{ActionDigest: ad})
			if err != nil || len(good.OutputFiles) != 1 || good.OutputFiles[0].Path != "out/x.txt" ||
				good.OutputFiles[0].Digest.Hash != DigestOf([]byte("hello thinlto\n")).Hash {
				t.Fatalf("cached result %v %v", good, err)
			}
			tc.check(t, c, good, got)

			// The same faults apply to GetActionResult.
			s.InjectFault(MethodGetActionResult, tc.fault, 1)
			got, err = c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{ActionDigest: ad})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c, good, got)
			if s.PendingFaults(MethodExecute, tc.fault)+s.PendingFaults(MethodGetActionResult, tc.fault) != 0 {
				t.Fatal("fault not consumed")
			}
		})
	}
}

func TestFaultCorruptRead(t *testing.T) {
	for _, zstd := range []bool{false, true} {
		name := "identity"
		if zstd {
			name = "zstd"
		}
		t.Run(name, func(t *testing.T) {
			s, c := startFake(t, Options{Zstd: zstd})
			blob := []byte("object file bytes")
			d := c.Upload(t, blob)[0]
			res := "blobs/" + d.Hash + "/" + itoa(d.SizeBytes)
			if zstd {
				res = "compressed-blobs/zstd/" + d.Hash + "/" + itoa(d.SizeBytes)
			}
			s.InjectFault(MethodRead, FaultCorruptRead, 1)
			got, err := c.read(t, res)
			if err != nil {
				t.Fatal(err)
			}
			if zstd {
				if got, err = zstdDecompress(got); err != nil {
					t.Fatal(err)
				}
			}
			if DigestOf(got).Hash == d.Hash {
				t.Fatal("Read not corrupted")
			}
			if got, _ := c.read(t, "blobs/"+d.Hash+"/"+itoa(d.SizeBytes)); string(got) != string(blob) {
				t.Fatalf("second read %q", got)
			}

			s.InjectFault(MethodBatchReadBlobs, FaultCorruptRead, 1)
			req := &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{d}}
			if zstd {
				req.AcceptableCompressors = []repb.Compressor_Value{repb.Compressor_ZSTD}
			}
			resp, err := c.CAS.BatchReadBlobs(callContext(t), req)
			if err != nil {
				t.Fatal(err)
			}
			data := resp.Responses[0].Data
			if zstd {
				if resp.Responses[0].Compressor != repb.Compressor_ZSTD {
					t.Fatal("zstd not used")
				}
				if data, err = zstdDecompress(data); err != nil {
					t.Fatal(err)
				}
			}
			if DigestOf(data).Hash == d.Hash {
				t.Fatal("BatchReadBlobs not corrupted")
			}
		})
	}
}

func TestHookHeadersAndInstanceNames(t *testing.T) {
	s, c := startFake(t, Options{Hook: func(method string, md metadata.MD) error {
		if method == MethodGetActionResult && len(md.Get("x-deny")) > 0 {
			return status.Error(codes.PermissionDenied, "hook said no")
		}
		return nil
	}})
	ctx := metadata.AppendToOutgoingContext(callContext(t), "x-thindist-header", "v1", "x-deny", "1")
	_, err := c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: "main/ci", ActionDigest: DigestOf(nil)})
	wantCode(t, err, codes.PermissionDenied)
	ctx = metadata.AppendToOutgoingContext(callContext(t), "x-thindist-header", "v2")
	_, err = c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: "main/ci", ActionDigest: DigestOf(nil)})
	wantCode(t, err, codes.NotFound)
	if _, err := c.read(t, "other/blobs/"+DigestOf(nil).Hash+"/0"); status.Code(err) != codes.NotFound {
		t.Fatalf("read: %v", err)
	}
	if got := s.HeaderValues("X-Thindist-Header"); len(got) != 2 || got[0] != "v1" || got[1] != "v2" {
		t.Fatalf("headers %v", got)
	}
	if got := s.InstanceNames(); len(got) != 2 || got[0] != "main/ci" || got[1] != "other" {
		t.Fatalf("instances %v", got)
	}
	calls := s.Calls()
	if len(calls) != 3 || calls[0].Method != MethodGetActionResult || calls[2].Method != MethodRead {
		t.Fatalf("calls %v", calls)
	}
	if st := s.Stats(); st.ACMisses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Ensure an injected fault on one method does not leak to another.
func TestFaultIsPerMethod(t *testing.T) {
	s, c := startFake(t, Options{})
	s.InjectFault(MethodBatchUpdateBlobs, FaultUnavailable, 1)
	if _, err := c.CAS.FindMissingBlobs(callContext(t), &repb.FindMissingBlobsRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CAS.BatchUpdateBlobs(callContext(t), &repb.BatchUpdateBlobsRequest{})
	wantCode(t, err, codes.Unavailable)
	s.InjectFault(MethodWrite, FaultUnavailable, 1)
	s.ClearFaults()
	blob := []byte("after clear")
	d := DigestOf(blob)
	if _, err := c.write(t, "uploads/u1/blobs/"+d.Hash+"/"+itoa(d.SizeBytes), 0, [][]byte{blob}, true); err != nil {
		t.Fatalf("Write after ClearFaults: %v", err)
	}
}
