package reapitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// WorkerName is reported in ExecutedActionMetadata.worker.
const WorkerName = "reapitest-fake-worker"

// operation tracks one execution for Execute and WaitExecution.
type operation struct {
	name         string
	actionDigest *repb.Digest

	mu      sync.Mutex
	stage   repb.ExecutionStage_Value
	changed chan struct{}         // closed (and replaced) when the stage changes
	resp    *repb.ExecuteResponse // set when done
	done    chan struct{}
	// What Execute asked to inline in the result.
	inline                     []string
	inlineStdout, inlineStderr bool
	// ctx is the execution's; cancel ends it when a client cancels its
	// stream.
	ctx    context.Context
	cancel context.CancelFunc
}

func (o *operation) setStage(st repb.ExecutionStage_Value) {
	o.mu.Lock()
	if o.stage != st {
		o.stage = st
		close(o.changed)
		o.changed = make(chan struct{})
	}
	o.mu.Unlock()
}

// current returns the stage and a channel closed when it changes.
func (o *operation) current() (repb.ExecutionStage_Value, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stage, o.changed
}

func (o *operation) finish(resp *repb.ExecuteResponse) {
	o.mu.Lock()
	o.stage = repb.ExecutionStage_COMPLETED
	o.resp = resp
	o.mu.Unlock()
	close(o.done)
}

// snapshot builds the longrunning Operation for the current state, applying
// the ActionResult faults pending for method to a final result.
func (s *FakeServer) snapshot(o *operation, method string) (*longrunningpb.Operation, error) {
	o.mu.Lock()
	stage, resp := o.stage, o.resp
	o.mu.Unlock()
	md, err := anypb.New(&repb.ExecuteOperationMetadata{
		Stage:          stage,
		ActionDigest:   o.actionDigest,
		DigestFunction: repb.DigestFunction_SHA256,
	})
	if err != nil {
		return nil, err
	}
	op := &longrunningpb.Operation{Name: o.name, Metadata: md}
	if resp == nil {
		return op, nil
	}
	resp = proto.Clone(resp).(*repb.ExecuteResponse)
	resp.Result, _ = s.applyResultFaults(method, resp.Result)
	if resp.Result != nil && s.inlineOutputs.Load() {
		s.inline(method, resp.Result, o.inline, o.inlineStdout, o.inlineStderr)
	}
	r, err := anypb.New(resp)
	if err != nil {
		return nil, err
	}
	op.Done = true
	op.Result = &longrunningpb.Operation_Response{Response: r}
	return op, nil
}

func (s *FakeServer) newOperation(instance string, d *repb.Digest) *operation {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("operations/%d-%s", s.opCounter.Add(1), hex.EncodeToString(b[:]))
	if instance != "" {
		name = instance + "/" + name
	}
	o := &operation{name: name, actionDigest: d, stage: repb.ExecutionStage_QUEUED,
		changed: make(chan struct{}), done: make(chan struct{})}
	o.ctx, o.cancel = context.WithCancel(s.ctx)
	s.mu.Lock()
	s.ops[name] = o
	s.mu.Unlock()
	return o
}

// execService implements repb.ExecutionServer.
type execService struct {
	repb.UnimplementedExecutionServer
	s *FakeServer
}

func (e execService) Execute(req *repb.ExecuteRequest, stream grpc.ServerStreamingServer[longrunningpb.Operation]) error {
	s := e.s
	s.executeCalls.Add(1)
	s.noteInstance(req.GetInstanceName())
	s.mu.Lock()
	s.priorities = append(s.priorities, req.GetExecutionPolicy().GetPriority())
	s.mu.Unlock()
	if err := checkDigestFunction(req.GetDigestFunction()); err != nil {
		return err
	}
	if err := validDigest(req.GetActionDigest()); err != nil {
		return err
	}
	action, command, err := s.loadAction(req.GetActionDigest())
	if err != nil {
		return err
	}
	platform := action.GetPlatform()
	if len(platform.GetProperties()) == 0 {
		platform = command.GetPlatform()
	}
	if !s.platformAccepted(platform) {
		s.execRejections.Add(1)
		if s.opts.NoWorkerFailedPrecondition {
			return status.Errorf(codes.FailedPrecondition,
				"reapitest: No workers exist for instance name prefix %q platform %v", req.GetInstanceName(), platform.GetProperties())
		}
		return status.Errorf(codes.Unavailable, "reapitest: no fake worker matches platform %v", platform.GetProperties())
	}

	op := s.newOperation(req.GetInstanceName(), req.GetActionDigest())
	op.inline, op.inlineStdout, op.inlineStderr = req.GetInlineOutputFiles(), req.GetInlineStdout(), req.GetInlineStderr()
	if !req.GetSkipCacheLookup() && !s.opts.ExecuteIgnoresActionCache {
		op.setStage(repb.ExecutionStage_CACHE_CHECK)
		if ar, ok := s.ac.get(req.GetInstanceName(), req.GetActionDigest()); ok {
			s.acHits.Add(1)
			op.finish(&repb.ExecuteResponse{Result: ar, CachedResult: true, Status: StatusOf(nil)})
			return s.streamOperation(op, stream, MethodExecute, nil)
		}
		s.acMisses.Add(1)
		op.setStage(repb.ExecutionStage_QUEUED)
	}

	// Snapshot the QUEUED state before the action starts so that the first
	// message of a non-cached Execute is always an in-progress Operation.
	first, err := s.snapshot(op, MethodExecute)
	if err != nil {
		return status.Errorf(codes.Internal, "snapshot: %v", err)
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "reapitest: server stopping")
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer op.cancel()
		s.stall(op.ctx, time.Duration(s.queueFor.Load()))
		if s.workers != nil {
			select {
			case s.workers <- struct{}{}:
				defer func() { <-s.workers }()
			case <-op.ctx.Done():
			}
		}
		if s.cluster == nil {
			op.setStage(repb.ExecutionStage_EXECUTING)
		}
		// A worker took the action and went silent (SIGKILLed): the server
		// keeps reporting it EXECUTING.
		s.stall(op.ctx, time.Duration(s.executingFor.Load()))
		if s.takeStall() || s.stalls(action, command) {
			s.stall(op.ctx, -1)
		}
		if op.ctx.Err() != nil {
			// Stopped, or cancelled by its client, during a hold: the
			// action never reached a worker.
			op.finish(StoppedResponse())
			return
		}
		var resp *repb.ExecuteResponse
		if s.cluster != nil {
			resp = s.cluster.Execute(&Execution{Ctx: op.ctx, Action: action, Command: command, Instance: req.GetInstanceName(),
				Priority: req.GetExecutionPolicy().GetPriority(), Server: s, op: op})
		} else {
			resp = s.run(op.ctx, req.GetInstanceName(), action, command, nil)
		}
		if resp.GetStatus().GetCode() == int32(codes.OK) && resp.GetResult().GetExitCode() == 0 && !action.GetDoNotCache() {
			s.ac.put(req.GetInstanceName(), req.GetActionDigest(), resp.GetResult())
		}
		op.finish(resp)
	}()
	return s.streamOperation(op, stream, MethodExecute, first)
}

func (e execService) WaitExecution(req *repb.WaitExecutionRequest, stream grpc.ServerStreamingServer[longrunningpb.Operation]) error {
	s := e.s
	s.waitCalls.Add(1)
	s.mu.Lock()
	op := s.ops[req.GetName()]
	s.mu.Unlock()
	if op == nil {
		return status.Errorf(codes.NotFound, "reapitest: unknown operation %q", req.GetName())
	}
	return s.streamOperation(op, stream, MethodWaitExecution, nil)
}

// streamOperation sends first (or, if nil, the current state of op) and,
// unless that is already done, each change of stage (QUEUED to EXECUTING)
// and the final state once the action finishes.
func (s *FakeServer) streamOperation(op *operation, stream grpc.ServerStreamingServer[longrunningpb.Operation], method string, first *longrunningpb.Operation) error {
	msg := first
	if msg == nil {
		var err error
		if msg, err = s.snapshot(op, method); err != nil {
			return status.Errorf(codes.Internal, "snapshot: %v", err)
		}
	}
	if err := stream.Send(msg); err != nil {
		return err
	}
	if msg.Done {
		return s.sentDone(stream)
	}
	if method == MethodExecute {
		if s.takeFault(MethodExecute, FaultDropExecuteStream) {
			return nil
		}
		if s.takeFault(MethodExecute, FaultBreakExecuteStream) {
			return status.Error(codes.Unavailable, "reapitest: injected broken Execute stream")
		}
	}
	sent := StageOf(msg)
	for done := false; !done; {
		st, changed := op.current()
		if st != sent && st != repb.ExecutionStage_COMPLETED {
			m, err := s.snapshot(op, method)
			if err != nil {
				return status.Errorf(codes.Internal, "snapshot: %v", err)
			}
			if m.Done {
				if err := stream.Send(m); err != nil {
					return err
				}
				return s.sentDone(stream)
			}
			if err := stream.Send(m); err != nil {
				return err
			}
			sent = st
		}
		select {
		case <-op.done:
			done = true
		case <-changed:
		case <-stream.Context().Done():
			// The client gave up on the operation: nobody waits for it
			// any more, so it is cancelled.
			s.cancellations.Add(1)
			op.cancel()
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
	msg, err := s.snapshot(op, method)
	if err != nil {
		return status.Errorf(codes.Internal, "snapshot: %v", err)
	}
	if err := stream.Send(msg); err != nil {
		return err
	}
	return s.sentDone(stream)
}

// sentDone ends a stream whose finished operation has been sent: at once,
// or after Options.LingerAfterDone, counting a client that cancels the
// stream meanwhile.
func (s *FakeServer) sentDone(stream grpc.ServerStreamingServer[longrunningpb.Operation]) error {
	if s.opts.LingerAfterDone <= 0 {
		return nil
	}
	t := time.NewTimer(s.opts.LingerAfterDone)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-stream.Context().Done():
		s.lateCancels.Add(1)
		return status.FromContextError(stream.Context().Err()).Err()
	}
}

// StageOf is the stage an operation's metadata reports (UNKNOWN without any).
func StageOf(op *longrunningpb.Operation) repb.ExecutionStage_Value {
	var md repb.ExecuteOperationMetadata
	if op.GetMetadata() == nil || op.GetMetadata().UnmarshalTo(&md) != nil {
		return repb.ExecutionStage_UNKNOWN
	}
	return md.Stage
}

func (s *FakeServer) platformAccepted(p *repb.Platform) bool {
	if s.opts.Platform == nil {
		return true
	}
	for _, prop := range p.GetProperties() {
		vals, ok := s.opts.Platform[prop.GetName()]
		if !ok || !slices.Contains(vals, prop.GetValue()) {
			return false
		}
	}
	return true
}

func (s *FakeServer) loadAction(d *repb.Digest) (*repb.Action, *repb.Command, error) {
	data, ok := s.cas.get(d)
	if !ok {
		return nil, nil, MissingBlobsError([]*repb.Digest{d})
	}
	action := &repb.Action{}
	if err := proto.Unmarshal(data, action); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "action blob is not an Action: %v", err)
	}
	if err := validDigest(action.GetCommandDigest()); err != nil {
		return nil, nil, err
	}
	if err := validDigest(action.GetInputRootDigest()); err != nil {
		return nil, nil, err
	}
	data, ok = s.cas.get(action.GetCommandDigest())
	if !ok {
		return nil, nil, MissingBlobsError([]*repb.Digest{action.GetCommandDigest()})
	}
	command := &repb.Command{}
	if err := proto.Unmarshal(data, command); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "command blob is not a Command: %v", err)
	}
	if len(command.GetArguments()) == 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "command has no arguments")
	}
	return action, command, nil
}

// stall waits d (0: not at all; negative: until ctx ends), or less if ctx
// ends first.
func (s *FakeServer) stall(ctx context.Context, d time.Duration) {
	if d == 0 {
		return
	}
	var wait <-chan time.Time // nil: until the server stops
	if d > 0 {
		wait = time.After(d)
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
}
