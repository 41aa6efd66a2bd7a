package reapitest

import (
	"context"
	"errors"
	"io"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// This file is a REAPI client for tests of a FakeServer (and of what sits
// in front of one, such as the cluster simulator): uploads, actions built
// from a description, Execute to completion.

// callContext is a test's context, with a deadline for one call.
func callContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// marshal is m's deterministic encoding; it fails the test on error.
func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Client bundles raw gRPC clients of a FakeServer, for tests that make
// REAPI calls themselves.
type Client struct {
	Conn         *grpc.ClientConn
	Capabilities repb.CapabilitiesClient
	CAS          repb.ContentAddressableStorageClient
	AC           repb.ActionCacheClient
	Exec         repb.ExecutionClient
	ByteStream   bspb.ByteStreamClient
}

// NewClient dials addr (insecure unless opts say otherwise); the
// connection is closed when the test ends.
func NewClient(t testing.TB, addr string, opts ...grpc.DialOption) *Client {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Client{
		Conn:         conn,
		Capabilities: repb.NewCapabilitiesClient(conn),
		CAS:          repb.NewContentAddressableStorageClient(conn),
		AC:           repb.NewActionCacheClient(conn),
		Exec:         repb.NewExecutionClient(conn),
		ByteStream:   bspb.NewByteStreamClient(conn),
	}
}

// Upload stores blobs with BatchUpdateBlobs and fails the test on error.
func (c *Client) Upload(t testing.TB, blobs ...[]byte) []*repb.Digest {
	t.Helper()
	req := &repb.BatchUpdateBlobsRequest{}
	var ds []*repb.Digest
	for _, b := range blobs {
		d := DigestOf(b)
		ds = append(ds, d)
		req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: d, Data: b})
	}
	resp, err := c.CAS.BatchUpdateBlobs(callContext(t), req)
	if err != nil {
		t.Fatalf("BatchUpdateBlobs: %v", err)
	}
	for _, r := range resp.Responses {
		if r.Status.GetCode() != 0 {
			t.Fatalf("BatchUpdateBlobs %s: %v", r.Digest.Hash, r.Status)
		}
	}
	return ds
}

// An InputFile is one file of a test input root.
type InputFile struct {
	Data []byte
	Exec bool
}

// An ActionSpec describes an Action for Build: Files maps a directory path
// ("" is the root) to its files, Links maps directory to symlink name to
// target.
type ActionSpec struct {
	Args       []string
	Env        map[string]string // sorted when built
	WorkDir    string
	Outputs    []string
	Files      map[string]map[string]InputFile
	Links      map[string]map[string]string
	Platform   map[string]string
	Timeout    time.Duration
	DoNotCache bool
	Salt       string
}

// Build uploads the input tree, Command and Action through c and returns
// the Action digest.
func (a ActionSpec) Build(t testing.TB, c *Client) *repb.Digest {
	t.Helper()
	var blobs [][]byte
	var mkdir func(p string) *repb.Digest
	mkdir = func(p string) *repb.Digest {
		dir := &repb.Directory{}
		for _, name := range sortedKeys(a.Files[p]) {
			f := a.Files[p][name]
			blobs = append(blobs, f.Data)
			dir.Files = append(dir.Files, &repb.FileNode{Name: name, Digest: DigestOf(f.Data), IsExecutable: f.Exec})
		}
		subs := map[string]bool{}
		for q := range a.Files {
			if q == "" || q == p {
				continue
			}
			rest := q
			if p != "" {
				if len(q) <= len(p) || q[:len(p)+1] != p+"/" {
					continue
				}
				rest = q[len(p)+1:]
			}
			for i := 0; i < len(rest); i++ {
				if rest[i] == '/' {
					rest = rest[:i]
					break
				}
			}
			subs[rest] = true
		}
		for _, name := range sortedKeys(subs) {
			child := name
			if p != "" {
				child = p + "/" + name
			}
			dir.Directories = append(dir.Directories, &repb.DirectoryNode{Name: name, Digest: mkdir(child)})
		}
		for _, name := range sortedKeys(a.Links[p]) {
			dir.Symlinks = append(dir.Symlinks, &repb.SymlinkNode{Name: name, Target: a.Links[p][name]})
		}
		b := marshal(t, dir)
		blobs = append(blobs, b)
		return DigestOf(b)
	}
	root := mkdir("")
	cmd := &repb.Command{Arguments: a.Args, WorkingDirectory: a.WorkDir, OutputPaths: a.Outputs}
	for _, k := range sortedKeys(a.Env) {
		cmd.EnvironmentVariables = append(cmd.EnvironmentVariables, &repb.Command_EnvironmentVariable{Name: k, Value: a.Env[k]})
	}
	cmdBlob := marshal(t, cmd)
	action := &repb.Action{CommandDigest: DigestOf(cmdBlob), InputRootDigest: root, DoNotCache: a.DoNotCache, Salt: []byte(a.Salt)}
	if len(a.Platform) > 0 {
		action.Platform = &repb.Platform{}
		for _, k := range sortedKeys(a.Platform) {
			action.Platform.Properties = append(action.Platform.Properties, &repb.Platform_Property{Name: k, Value: a.Platform[k]})
		}
	}
	if a.Timeout > 0 {
		action.Timeout = durationpb.New(a.Timeout)
	}
	actionBlob := marshal(t, action)
	blobs = append(blobs, cmdBlob, actionBlob)
	c.Upload(t, blobs...)
	return DigestOf(actionBlob)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Drain reads an Execute/WaitExecution stream to its end. It returns every
// Operation received and the stream's final error (nil for a clean EOF).
func Drain(stream grpc.ServerStreamingClient[longrunningpb.Operation]) ([]*longrunningpb.Operation, error) {
	var ops []*longrunningpb.Operation
	for {
		op, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return ops, err
		}
		ops = append(ops, op)
	}
}

// Response extracts the ExecuteResponse of a done Operation.
func Response(t testing.TB, op *longrunningpb.Operation) *repb.ExecuteResponse {
	t.Helper()
	if !op.GetDone() {
		t.Fatalf("operation %s not done", op.GetName())
	}
	resp := &repb.ExecuteResponse{}
	if err := op.GetResponse().UnmarshalTo(resp); err != nil {
		t.Fatalf("operation response: %v", err)
	}
	return resp
}

// Execute runs Execute to completion and returns the final response.
func (c *Client) Execute(t testing.TB, req *repb.ExecuteRequest) *repb.ExecuteResponse {
	t.Helper()
	stream, err := c.Exec.Execute(callContext(t), req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	ops, err := Drain(stream)
	if err != nil {
		t.Fatalf("Execute stream: %v", err)
	}
	if len(ops) == 0 {
		t.Fatal("Execute sent no operations")
	}
	for _, op := range ops[:len(ops)-1] {
		if op.GetDone() {
			t.Fatalf("done operation before the last one")
		}
	}
	resp := Response(t, ops[len(ops)-1])
	return resp
}
