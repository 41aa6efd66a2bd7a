package reapitest

import (
	"context"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Cluster stands in for a FakeServer's workers and the network between
// it and its clients (Options.Cluster): the cluster simulator of package
// reapisim is one. Without one, every RPC is handled at once and every
// execution runs here, Options.Workers at a time.
type Cluster interface {
	// Unary handles a unary RPC, once the server has counted it and
	// injected its faults: it calls handler, holding the call as the
	// network would.
	Unary(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error)
	// Stream returns the stream a streaming RPC's handler is given, once
	// the server has counted it and injected its faults.
	Stream(ss grpc.ServerStream) grpc.ServerStream
	// Execute runs an execution the action cache did not answer, after
	// the server's holds (QueueFor, ExecutingFor, stalls). It sets the
	// stage EXECUTING when a worker takes the action.
	Execute(x *Execution) *repb.ExecuteResponse
}

// An Execution is one execution that a Cluster runs for a FakeServer.
type Execution struct {
	// Ctx ends when the server stops or when no client waits for the
	// operation any more (a race lost): a cluster frees the action's
	// worker at once, as a real worker would be killed.
	Ctx      context.Context
	Action   *repb.Action
	Command  *repb.Command
	Instance string
	Priority int32 // the request's ExecutionPolicy priority

	Server *FakeServer
	op     *operation
}

// SetExecuting moves the operation to stage EXECUTING.
func (x *Execution) SetExecuting() { x.op.setStage(repb.ExecutionStage_EXECUTING) }

// Run executes the action for real, on this machine, as a FakeServer
// without a Cluster does, until the server stops; it returns the response
// and the CPU time the command took (user and system, with the children
// it waited for).
func (x *Execution) Run() (*repb.ExecuteResponse, time.Duration) {
	var cpu time.Duration
	resp := x.Server.run(x.Server.ctx, x.Instance, x.Action, x.Command, &cpu)
	return resp, cpu
}

// ServerContext ends when the server stops.
func (x *Execution) ServerContext() context.Context { return x.Server.ctx }

// StoppedResponse is the response to an execution that ended because the
// server stopped or its client went away.
func StoppedResponse() *repb.ExecuteResponse {
	return &repb.ExecuteResponse{Status: StatusOf(status.Error(codes.Unavailable, "reapitest: server stopped"))}
}

// KeepBlob stores data under d in the server's CAS as it is, without
// copying or digesting it (d must be its digest), and packed as its zstd
// form when not nil: for blobs that never change, such as a recording's.
func (s *FakeServer) KeepBlob(d *repb.Digest, data, packed []byte) {
	s.cas.keepRecorded(d, data, packed)
}
