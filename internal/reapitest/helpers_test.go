package reapitest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// clients bundles raw gRPC clients built from the same generated protos.
type clients struct {
	conn *grpc.ClientConn
	cap  repb.CapabilitiesClient
	cas  repb.ContentAddressableStorageClient
	ac   repb.ActionCacheClient
	exec repb.ExecutionClient
	bs   bspb.ByteStreamClient
}

func newClients(t *testing.T, addr string, opts ...grpc.DialOption) *clients {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &clients{
		conn: conn,
		cap:  repb.NewCapabilitiesClient(conn),
		cas:  repb.NewContentAddressableStorageClient(conn),
		ac:   repb.NewActionCacheClient(conn),
		exec: repb.NewExecutionClient(conn),
		bs:   bspb.NewByteStreamClient(conn),
	}
}

func startFake(t *testing.T, opts Options) (*FakeServer, *clients) {
	t.Helper()
	s, addr := StartT(t, opts)
	return s, newClients(t, addr)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upload stores blobs with BatchUpdateBlobs and fails the test on error.
func (c *clients) upload(t *testing.T, blobs ...[]byte) []*repb.Digest {
	t.Helper()
	req := &repb.BatchUpdateBlobsRequest{}
	var ds []*repb.Digest
	for _, b := range blobs {
		d := digestOf(b)
		ds = append(ds, d)
		req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: d, Data: b})
	}
	resp, err := c.cas.BatchUpdateBlobs(ctxT(t), req)
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

// read fetches a blob with ByteStream Read.
func (c *clients) read(t *testing.T, resourceName string) ([]byte, error) {
	t.Helper()
	stream, err := c.bs.Read(ctxT(t), &bspb.ReadRequest{ResourceName: resourceName})
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, msg.Data...)
	}
}

// inputFile describes one file of a test input root.
type inputFile struct {
	data []byte
	exec bool
}

// actionSpec builds an Action; dirs maps a directory path ("" is the
// root) to its files, links maps directory to symlink name to target.
type actionSpec struct {
	args       []string
	env        map[string]string // sorted when built
	workDir    string
	outputs    []string
	files      map[string]map[string]inputFile
	links      map[string]map[string]string
	platform   map[string]string
	timeout    time.Duration
	doNotCache bool
	salt       string
}

// build uploads the input tree, Command and Action and returns the Action
// digest.
func (a actionSpec) build(t *testing.T, c *clients) *repb.Digest {
	t.Helper()
	var blobs [][]byte
	var mkdir func(p string) *repb.Digest
	mkdir = func(p string) *repb.Digest {
		dir := &repb.Directory{}
		for _, name := range sortedKeys(a.files[p]) {
			f := a.files[p][name]
			blobs = append(blobs, f.data)
			dir.Files = append(dir.Files, &repb.FileNode{Name: name, Digest: digestOf(f.data), IsExecutable: f.exec})
		}
		subs := map[string]bool{}
		for q := range a.files {
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
		for _, name := range sortedKeys(a.links[p]) {
			dir.Symlinks = append(dir.Symlinks, &repb.SymlinkNode{Name: name, Target: a.links[p][name]})
		}
		b := mustMarshal(t, dir)
		blobs = append(blobs, b)
		return digestOf(b)
	}
	root := mkdir("")
	cmd := &repb.Command{Arguments: a.args, WorkingDirectory: a.workDir, OutputPaths: a.outputs}
	for _, k := range sortedKeys(a.env) {
		cmd.EnvironmentVariables = append(cmd.EnvironmentVariables, &repb.Command_EnvironmentVariable{Name: k, Value: a.env[k]})
	}
	cmdBlob := mustMarshal(t, cmd)
	action := &repb.Action{CommandDigest: digestOf(cmdBlob), InputRootDigest: root, DoNotCache: a.doNotCache, Salt: []byte(a.salt)}
	if len(a.platform) > 0 {
		action.Platform = &repb.Platform{}
		for _, k := range sortedKeys(a.platform) {
			action.Platform.Properties = append(action.Platform.Properties, &repb.Platform_Property{Name: k, Value: a.platform[k]})
		}
	}
	if a.timeout > 0 {
		action.Timeout = durationpb.New(a.timeout)
	}
	actionBlob := mustMarshal(t, action)
	blobs = append(blobs, cmdBlob, actionBlob)
	c.upload(t, blobs...)
	return digestOf(actionBlob)
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

// drain reads an Execute/WaitExecution stream to its end. It returns every
// Operation received and the stream's final error (nil for a clean EOF).
func drain(stream grpc.ServerStreamingClient[longrunningpb.Operation]) ([]*longrunningpb.Operation, error) {
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

// response extracts the ExecuteResponse of a done Operation.
func response(t *testing.T, op *longrunningpb.Operation) *repb.ExecuteResponse {
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

// execute runs Execute to completion and returns the final response.
func (c *clients) execute(t *testing.T, req *repb.ExecuteRequest) *repb.ExecuteResponse {
	t.Helper()
	stream, err := c.exec.Execute(ctxT(t), req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	ops, err := drain(stream)
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
	resp := response(t, ops[len(ops)-1])
	return resp
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
}
