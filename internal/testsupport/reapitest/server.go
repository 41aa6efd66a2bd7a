package reapitest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Full gRPC method names served by FakeServer. They are the keys of
// Stats.RPCs and the method argument of InjectFault and Options.Hook.
const (
	MethodGetCapabilities    = "/build.bazel.remote.execution.v2.Capabilities/GetCapabilities"
	MethodFindMissingBlobs   = "/build.bazel.remote.execution.v2.ContentAddressableStorage/FindMissingBlobs"
	MethodBatchUpdateBlobs   = "/build.bazel.remote.execution.v2.ContentAddressableStorage/BatchUpdateBlobs"
	MethodBatchReadBlobs     = "/build.bazel.remote.execution.v2.ContentAddressableStorage/BatchReadBlobs"
	MethodGetTree            = "/build.bazel.remote.execution.v2.ContentAddressableStorage/GetTree"
	MethodGetActionResult    = "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
	MethodUpdateActionResult = "/build.bazel.remote.execution.v2.ActionCache/UpdateActionResult"
	MethodExecute            = "/build.bazel.remote.execution.v2.Execution/Execute"
	MethodWaitExecution      = "/build.bazel.remote.execution.v2.Execution/WaitExecution"
	MethodRead               = "/google.bytestream.ByteStream/Read"
	MethodWrite              = "/google.bytestream.ByteStream/Write"
	MethodQueryWriteStatus   = "/google.bytestream.ByteStream/QueryWriteStatus"
)

// Options configures a FakeServer. The zero value is usable: no batch size
// limit, no compression, any platform accepted, plaintext gRPC.
type Options struct {
	// LingerAfterDone keeps an Execute or WaitExecution handler this long
	// after it has sent the finished operation, as a real server's
	// returns through more code after its last message, and counts a
	// client that cancels the stream meanwhile (Stats.CancelledAfterDone):
	// Buildbarn records those as cancelled executions.
	LingerAfterDone time.Duration
	// MaxBatchTotalSizeBytes is advertised in CacheCapabilities and
	// enforced by BatchUpdateBlobs and BatchReadBlobs (sum of digest sizes).
	// 0 means "no limit" as in the REAPI spec.
	MaxBatchTotalSizeBytes int64

	// MaxMessageSizeBytes emulates a gRPC message size limit that is
	// distinct from (and not advertised like) MaxBatchTotalSizeBytes, as
	// Buildbarn's maximumMessageSizeBytes (2 MiB in stock deployments)
	// while it advertises max_batch_total_size_bytes 0. When > 0, the gRPC
	// server refuses incoming messages larger than this (ResourceExhausted,
	// before any handler runs), and BatchUpdateBlobs and BatchReadBlobs
	// whose digests total more than this fail with InvalidArgument and
	// Buildbarn's wording ("Attempted to read a total of at least N bytes,
	// while a maximum of M bytes is permitted"). 0 means gRPC's defaults.
	MaxMessageSizeBytes int64

	// Zstd advertises Compressor ZSTD in both SupportedCompressors and
	// SupportedBatchUpdateCompressors and accepts it on every path
	// (BatchUpdateBlobs, BatchReadBlobs, ByteStream compressed-blobs).
	// When false, zstd requests are rejected with InvalidArgument.
	Zstd bool
	// ZstdStreamOnly, with Zstd, does as Buildbarn: zstd in
	// SupportedCompressors only (none for batches), BatchUpdateBlobs
	// refuses compressed requests with InvalidArgument, and
	// BatchReadBlobs ignores acceptable_compressors. ByteStream takes and
	// serves compressed blobs.
	ZstdStreamOnly bool

	// Platform is the set of accepted platform properties: property name to
	// allowed values. If nil, every platform is accepted. Otherwise every
	// property of an action's platform (Action.platform, or Command.platform
	// when the former is empty) must name a key of Platform with one of its
	// values, else Execute fails at once with codes.Unavailable (as
	// Buildbarn does when no worker matches). An empty non-nil map accepts
	// only actions without platform properties.
	Platform map[string][]string

	// NoWorkerFailedPrecondition makes Execute answer an action whose
	// platform Platform does not accept with FAILED_PRECONDITION ("No
	// workers exist for instance name prefix ... platform ...", without
	// PreconditionFailure details) instead of UNAVAILABLE, as Buildbarn's
	// scheduler does once platformQueueWithNoWorkersTimeout has passed
	// after its start (it answers UNAVAILABLE before).
	NoWorkerFailedPrecondition bool

	// ACUpdateDisabled advertises ActionCacheUpdateCapabilities
	// update_enabled=false and refuses UpdateActionResult with
	// PERMISSION_DENIED, as a Buildbarn frontend that lets only workers
	// write the action cache.
	ACUpdateDisabled bool

	// InlineOutputs makes GetActionResult and Execute honour
	// inline_output_files, inline_stdout and inline_stderr: the contents
	// of each listed output file whose blob is in the CAS are returned in
	// OutputFile.contents (and stdout and stderr in stdout_raw and
	// stderr_raw), up to 1 MiB in all (REAPI lets a server inline as much
	// as fits, or nothing). Off, the hints are ignored, as by servers that
	// never inline.
	InlineOutputs bool

	// ExecuteIgnoresActionCache makes Execute never look the action up in
	// the action cache (it always executes), as Buildbarn's scheduler
	// does; clients must call GetActionResult themselves.
	ExecuteIgnoresActionCache bool

	// QueueFor keeps every non-cached execution in stage QUEUED this long
	// before it runs, as a server with no free (or no live) worker does; a
	// negative value keeps it queued until the server stops. Execute
	// streams report the QUEUED operation and then wait. See also
	// SetQueueFor.
	QueueFor time.Duration

	// ExecutingFor keeps every non-cached execution in stage EXECUTING
	// this long before its command runs, as a worker that took the action
	// and then went silent; a negative value keeps it EXECUTING until the
	// server stops, as with a worker SIGKILLed mid-action whose death the
	// server never notices (Buildbarn reports such an action EXECUTING
	// until its scheduler drops the worker, a minute or more later).
	// Execute and WaitExecution streams report the EXECUTING operation and
	// then wait. See also SetExecutingFor.
	ExecutingFor time.Duration

	// MaxConcurrentStreams, when > 0, bounds the concurrent streams (calls)
	// of one client connection, as HTTP/2's MAX_CONCURRENT_STREAMS does on
	// servers and proxies that set it (often 100 or 128).
	MaxConcurrentStreams uint32

	// Workers, when > 0, is how many actions the server's workers run at
	// once; further executions stay QUEUED until a worker is free, as on
	// a cluster with that many worker slots. 0: no bound.
	Workers int

	// TLS, if non-nil, makes the server speak TLS with this configuration.
	// Set ClientAuth to tls.RequireAndVerifyClientCert for mTLS. See
	// TestCerts.ServerTLSConfig.
	TLS *tls.Config

	// ExecRootDir is the parent of the per-action temporary execution
	// directories; "" means os.TempDir().
	ExecRootDir string

	// KeepExecRoots leaves the per-action directories on disk (for
	// debugging a failing test). They are removed by default.
	KeepExecRoots bool

	// Chroot runs each command chrooted into its input root (chroot.go):
	// nothing of this machine is visible to it. Needs root
	// (ChrootSupported); arguments[0] must be a path in the root.
	Chroot bool
	// ChrootEnv, with Chroot, starts each command as Buildbarn's bb_runner
	// with chroot_into_input_root does: `/usr/bin/env -- ARGV`, the env
	// of the input root.
	ChrootEnv bool

	// Cluster, if non-nil, stands in for the server's workers and the
	// network (package reapisim simulates a cluster's timing for
	// benchmarks: recorded results replayed by a number of worker slots,
	// round-trip time, bandwidth). Nil leaves every behaviour above as it
	// is.
	Cluster Cluster

	// Hook, if non-nil, is called at the start of every RPC with its full
	// method name and incoming metadata. A non-nil error is returned to the
	// client instead of running the RPC. It may be called concurrently.
	Hook func(method string, md metadata.MD) error
}

// FakeServer is an in-memory REAPI v2 test double. Create it with
// NewFakeServer, then Start it. All methods are safe for concurrent use.
type FakeServer struct {
	opts Options

	cas     *casStore
	ac      *acStore
	cluster Cluster // Options.Cluster

	mu       sync.Mutex
	grpcSrv  *grpc.Server
	lis      net.Listener
	ctx      context.Context
	cancel   context.CancelFunc
	started  bool
	stopped  bool
	ops      map[string]*operation
	partials map[string]*partialWrite
	faults   map[string]map[Fault]int
	calls    []CallRecord
	// priorities are the Execute requests' ExecutionPolicy priorities.
	priorities []int32
	inst       []string
	instSeen   map[string]bool
	uploads    []UploadRecord
	rpcs       map[string]int64

	links linkCache // Options.Chroot's input files

	wg   sync.WaitGroup // background executions
	down chan struct{}  // closed when Stop has finished

	executions      atomic.Int64
	executeCalls    atomic.Int64
	waitCalls       atomic.Int64
	acHits          atomic.Int64
	acMisses        atomic.Int64
	findMissing     atomic.Int64
	blobsUploaded   atomic.Int64
	bytesRaw        atomic.Int64
	bytesWire       atomic.Int64
	opCounter       atomic.Int64
	blobsRead       atomic.Int64
	bytesReadRaw    atomic.Int64
	blobsReadZstd   atomic.Int64
	acUpdates       atomic.Int64
	execRejections  atomic.Int64
	batchRejections atomic.Int64
	queueFor        atomic.Int64                                           // Options.QueueFor, changeable with SetQueueFor
	inlineOutputs   atomic.Bool                                            // Options.InlineOutputs, changeable with SetInlineOutputs
	executingFor    atomic.Int64                                           // Options.ExecutingFor, changeable with SetExecutingFor
	stallNext       atomic.Int64                                           // executions still to stall (StallNext)
	stallIf         atomic.Pointer[func(*repb.Action, *repb.Command) bool] // StallIf
	cancellations   atomic.Int64
	lateCancels     atomic.Int64 // Stats.CancelledAfterDone
	// HangAfter and DieAfter: whether they are on, and the calls to go
	// before they act.
	hang, die       atomic.Bool
	hangIn, dieIn   atomic.Int64
	hung, hungEnded atomic.Int64
	workers         chan struct{} // Options.Workers slots, nil without a bound
}

// NewFakeServer returns a FakeServer configured by opts. It does not listen
// until Start is called.
func NewFakeServer(opts Options) *FakeServer {
	s := &FakeServer{
		opts:     opts,
		cas:      newCASStore(),
		ac:       newACStore(),
		ops:      map[string]*operation{},
		partials: map[string]*partialWrite{},
		faults:   map[string]map[Fault]int{},
		instSeen: map[string]bool{},
		rpcs:     map[string]int64{},
		down:     make(chan struct{}),
		cluster:  opts.Cluster,
	}
	s.queueFor.Store(int64(opts.QueueFor))
	s.inlineOutputs.Store(opts.InlineOutputs)
	s.executingFor.Store(int64(opts.ExecutingFor))
	if opts.Workers > 0 {
		s.workers = make(chan struct{}, opts.Workers)
	}
	return s
}

// StallNext makes the next n executions that reach a worker stay
// EXECUTING until their client cancels them or the server stops, as on a
// worker that hangs: a stalled action on an otherwise healthy cluster.
func (s *FakeServer) StallNext(n int) { s.stallNext.Add(int64(n)) }

// StallIf makes every execution whose action pick chooses stall as
// StallNext's do: a worker that hangs on one action, wherever it runs
// and whoever sends it. nil: none.
func (s *FakeServer) StallIf(pick func(*repb.Action, *repb.Command) bool) {
	if pick == nil {
		s.stallIf.Store(nil)
		return
	}
	s.stallIf.Store(&pick)
}

// stalls reports whether StallIf picks this execution.
func (s *FakeServer) stalls(a *repb.Action, c *repb.Command) bool {
	p := s.stallIf.Load()
	return p != nil && (*p)(a, c)
}

// takeStall reports whether this execution is one StallNext asked for.
func (s *FakeServer) takeStall() bool {
	for {
		n := s.stallNext.Load()
		if n <= 0 {
			return false
		}
		if s.stallNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// SetQueueFor changes Options.QueueFor for executions that start later.
func (s *FakeServer) SetQueueFor(d time.Duration) { s.queueFor.Store(int64(d)) }

// SetInlineOutputs changes Options.InlineOutputs for later calls.
func (s *FakeServer) SetInlineOutputs(on bool) { s.inlineOutputs.Store(on) }

// SetExecutingFor changes Options.ExecutingFor for executions that start
// later.
func (s *FakeServer) SetExecutingFor(d time.Duration) { s.executingFor.Store(int64(d)) }

// Start listens on 127.0.0.1:0 and serves in the background. It returns the
// "host:port" address to dial. Cancelling ctx stops the server as Stop does,
// so passing t.Context() cleans up automatically. Start may be called once.
func (s *FakeServer) Start(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return "", errors.New("reapitest: FakeServer already started")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("reapitest: listen: %w", err)
	}
	g := s.newGRPCServer()
	s.grpcSrv = g
	s.lis = lis
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.started = true
	go func() { _ = g.Serve(lis) }()
	if ctx != nil && ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				s.Stop()
			case <-s.ctx.Done():
			}
		}()
	}
	return lis.Addr().String(), nil
}

func (s *FakeServer) newGRPCServer() *grpc.Server {
	var sopts []grpc.ServerOption
	if s.opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(s.opts.TLS)))
	}
	sopts = append(sopts,
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
	)
	if n := s.opts.MaxConcurrentStreams; n > 0 {
		sopts = append(sopts, grpc.MaxConcurrentStreams(n))
	}
	if m := s.opts.MaxMessageSizeBytes; m > 0 {
		sopts = append(sopts, grpc.MaxRecvMsgSize(int(m)))
	}
	g := grpc.NewServer(sopts...)
	repb.RegisterCapabilitiesServer(g, capabilitiesService{s: s})
	repb.RegisterContentAddressableStorageServer(g, casService{s: s})
	repb.RegisterActionCacheServer(g, acService{s: s})
	repb.RegisterExecutionServer(g, execService{s: s})
	bspb.RegisterByteStreamServer(g, byteStreamService{s: s})
	return g
}

// Bounce emulates a frontend restart: it closes the listener and every
// connection (in-flight calls fail with Unavailable, new ones with
// "connection refused"), waits down, and serves again on the same address.
// Blobs, action results and operations survive (running actions go on, and
// WaitExecution finds them), as with a restarted frontend in front of a
// scheduler and storage that stayed up.
func (s *FakeServer) Bounce(down time.Duration) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return errors.New("reapitest: Bounce of a server that is not running")
	}
	g, addr := s.grpcSrv, s.lis.Addr().String()
	s.mu.Unlock()
	g.Stop()
	time.Sleep(down)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("reapitest: listen again on %s: %w", addr, err)
	}
	g = s.newGRPCServer()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.grpcSrv, s.lis = g, lis
	s.mu.Unlock()
	go func() { _ = g.Serve(lis) }()
	return nil
}

// Addr returns the listening address, or "" before Start.
func (s *FakeServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Stop closes the listener and all connections, cancels running actions and
// waits for them to finish. It is idempotent, and every call returns only
// once the server is down: Start's watcher of a cancelled t.Context() and
// the test's own cleanup may both call it, and the second must not return
// while executions still write into a directory the test is about to remove.
func (s *FakeServer) Stop() {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return
	}
	if s.stopped {
		s.mu.Unlock()
		<-s.down
		return
	}
	s.stopped = true
	g := s.grpcSrv
	s.cancel()
	s.mu.Unlock()
	g.Stop()
	s.wg.Wait()
	s.links.remove()
	close(s.down)
}

// begin records a call and applies Hook and the generic faults
// (FaultUnavailable, FaultDeadlineExceeded).
func (s *FakeServer) begin(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.rpcs[method]++
	s.calls = append(s.calls, CallRecord{Method: method, Metadata: md.Copy()})
	s.mu.Unlock()
	if h := s.opts.Hook; h != nil {
		if err := h(method, md.Copy()); err != nil {
			return err
		}
	}
	if err := s.misbehave(ctx, method); err != nil {
		return err
	}
	if s.takeFault(method, FaultUnavailable) {
		return status.Errorf(codes.Unavailable, "reapitest: injected Unavailable on %s", method)
	}
	if s.takeFault(method, FaultDeadlineExceeded) {
		return status.Errorf(codes.DeadlineExceeded, "reapitest: injected DeadlineExceeded on %s", method)
	}
	return nil
}

func (s *FakeServer) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.begin(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	if s.cluster != nil {
		return s.cluster.Unary(ctx, req, handler)
	}
	return handler(ctx, req)
}

func (s *FakeServer) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.begin(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if s.cluster != nil {
		return handler(srv, s.cluster.Stream(ss))
	}
	return handler(srv, ss)
}

func (s *FakeServer) execRootParent() string {
	if s.opts.ExecRootDir != "" {
		return s.opts.ExecRootDir
	}
	return os.TempDir()
}

// StartT starts a FakeServer for test t and returns it with the address to
// dial; it stops with the test. An unset Options.ExecRootDir becomes a
// temporary directory of the test's.
func StartT(t testing.TB, o Options) (*FakeServer, string) {
	t.Helper()
	if o.ExecRootDir == "" {
		o.ExecRootDir = t.TempDir()
	}
	s := NewFakeServer(o)
	addr, err := s.Start(t.Context())
	if err != nil {
		t.Fatalf("reapitest: starting the server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s, addr
}
