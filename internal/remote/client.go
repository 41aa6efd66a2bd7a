// Package remote talks to a Remote Execution API v2 service (Buildbarn,
// BuildBuddy, EngFlow, NativeLink, Google RBE): a CAS client that uploads
// each blob at most once per run, a cache.Store over the remote
// ActionCache, and an executor.Executor that runs backend actions on the
// service's workers.
package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	backoffpkg "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/sys/digest"
)

// Options says how to reach the service.
type Options struct {
	// Target is grpc://host:port (plaintext) or grpcs://host:port (TLS).
	Target string
	// Instance is the REAPI instance name ("" for the default).
	Instance string
	// CA is a PEM file of roots for grpcs; "" uses the system roots.
	CA string
	// Cert and Key are a PEM client certificate and key for mutual TLS.
	Cert, Key string
	// Headers are sent with every call (API keys, auth tokens).
	Headers [][2]string
	// RPCTimeout bounds each unary call and each blob transfer; default 1m.
	RPCTimeout time.Duration
	// MaxAttempts bounds the tries of a call that fails transiently;
	// default 10. It is a hard cap: retries also stop once RetryWindow
	// has passed.
	MaxAttempts int
	// RetryWindow is how long a call that keeps failing transiently is
	// tried again, with backoff (default 30s): long enough for gRPC to
	// reconnect to a restarted frontend, where MaxAttempts quick retries
	// would all fail with "connection refused" within a second.
	RetryWindow time.Duration
	// Compression is which transfers use zstd, where the server offers it
	// (default CompressDownloads).
	Compression Compression
	// ExecStreams is how many executions may be in flight at once
	// (--remote-jobs). Each holds an Execute stream for as long as it
	// runs, and servers and proxies commonly allow StreamsPerConn
	// concurrent streams per connection (HTTP/2 MAX_CONCURRENT_STREAMS):
	// gRPC would queue the rest inside thindist, and every other call
	// behind them. So executions get connections of their own, one per
	// StreamsPerConn of them, and the other calls keep the first.
	ExecStreams int
	// StreamsPerConn is the streams one connection is counted on to
	// carry (default 100).
	StreamsPerConn int
	// Invocation is the run's tool_invocation_id in the RequestMetadata
	// of every call; "" makes a new one (a random UUID).
	Invocation string
	// Build is the correlated_invocations_id in the RequestMetadata of
	// every call: the build the run belongs to; "" for none.
	Build string

	// dialer, if set, makes the connections instead of gRPC's own dialer
	// (tests: counting dials).
	dialer func(ctx context.Context, addr string) (net.Conn, error)
	// onBackoff, if set, is told each pause a retrier begins (tests: which
	// failures are tried again).
	onBackoff func(time.Duration)
}

// Client is a connection to the service with its capabilities.
type Client struct {
	opts Options
	conn *grpc.ClientConn
	Caps *repb.ServerCapabilities
	// RTT is how long GetCapabilities took once connected: a round trip
	// and the server's first call, so an upper estimate of the round
	// trip.
	RTT time.Duration

	// md is the header pairs every call carries (callMetadata).
	md []string

	cas repb.ContentAddressableStorageClient
	ac  repb.ActionCacheClient
	bs  bytestream.ByteStreamClient
	// execs are the execution clients, on the connections of execConns
	// (on conn when there are none), taken in turn.
	execs     []repb.ExecutionClient
	execConns []*grpc.ClientConn
	nextExec  atomic.Uint64

	zstdUpload, zstdRead, zstdBatch bool
	// link measures the transfers and, with CompressAuto, decides which
	// go compressed (compress.go).
	link *link
	// batchLimit is the largest batch request thindist sends; a batch the
	// server refuses as too large lowers it for the rest of the run.
	batchLimit atomic.Int64
	enc        *zstd.Encoder
	dec        *zstd.Decoder

	// health stops the run's use of the service once it is found down.
	health *health

	// CAS is the uploader shared by every action of the run.
	CAS       *Uploader
	bufs      readBufs
	transfers transferCounters
	// reads coalesces the BatchReadBlobs calls of the actions in flight.
	reads *coalescer[[]digest.Digest, read]
}

// grpcMax is gRPC's default message limit: no batch is larger, whatever
// the server advertises.
const grpcMax = 4 << 20

// unadvertisedBatchLimit bounds batches when the server advertises no
// limit (0). Such a server still enforces its gRPC message size, which is
// not in the capabilities and may well be below gRPC's 4 MiB default:
// Buildbarn's stock maximumMessageSizeBytes is 2 MiB. So batches stay at
// 1 MiB, and larger blobs go over ByteStream one by one.
const unadvertisedBatchLimit = 1 << 20

// minBatchLimit is as low as a refused batch lowers the limit.
const minBatchLimit = 64 << 10

// Dial connects to the service, reads its capabilities and checks that it
// can serve thindist (SHA-256 digests).
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.RPCTimeout <= 0 {
		o.RPCTimeout = time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.RetryWindow <= 0 {
		o.RetryWindow = 30 * time.Second
	}
	// A call that keeps failing is not retried for longer than a call may
	// wait for its answer: either way the service is then given up for
	// the run (health), within about one RPCTimeout.
	o.RetryWindow = min(o.RetryWindow, o.RPCTimeout)
	addr, creds, err := transport(o)
	if err != nil {
		return nil, err
	}
	h := newHealth(o.Target)
	newConn := func() (*grpc.ClientConn, error) {
		var dialer []grpc.DialOption
		if o.dialer != nil {
			dialer = append(dialer, grpc.WithContextDialer(o.dialer))
		}
		return grpc.NewClient(addr, append(dialer, grpc.WithTransportCredentials(creds),
			grpc.WithChainUnaryInterceptor(h.unary), grpc.WithChainStreamInterceptor(h.stream),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20),
				grpc.ForceCodecV2(newCodec())),
			// Reconnect soon after the connection drops (gRPC's default
			// waits 1s, then up to 2 minutes): a restarted frontend is
			// back within the retry window.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoffpkg.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
				MinConnectTimeout: 5 * time.Second,
			}))...)
	}
	conn, err := newConn()
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w", o.Target, err)
	}
	if o.Invocation == "" {
		o.Invocation = uuid()
	}
	c := &Client{
		opts: o, conn: conn, md: callMetadata(o), health: h,
		cas: repb.NewContentAddressableStorageClient(conn),
		ac:  repb.NewActionCacheClient(conn),
		bs:  bytestream.NewByteStreamClient(conn),
	}
	if o.StreamsPerConn <= 0 {
		o.StreamsPerConn = 100
	}
	// Connections are made lazily, at their first call.
	for n := 0; n < o.ExecStreams; n += o.StreamsPerConn {
		ec, err := newConn()
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("remote %s: %w", o.Target, err)
		}
		c.execConns = append(c.execConns, ec)
		c.execs = append(c.execs, repb.NewExecutionClient(ec))
	}
	if len(c.execs) == 0 {
		c.execs = []repb.ExecutionClient{repb.NewExecutionClient(conn)}
	}
	var caps *repb.ServerCapabilities
	// A service that cannot be reached at all is given a few seconds, not
	// the whole retry window, and one whose host refuses the connection
	// not even those (dialRetryable): the link then compiles locally.
	err = c.retryWhile(ctx, min(dialWindow, o.RetryWindow), dialRetryable, func(ctx context.Context) error {
		var err error
		// Connected first, the call times a round trip, not the
		// connection's setup (20 ms even on loopback): RTT.
		conn.Connect()
		for st := conn.GetState(); st == connectivity.Idle || st == connectivity.Connecting; st = conn.GetState() {
			if !conn.WaitForStateChange(ctx, st) {
				break
			}
		}
		start := time.Now()
		caps, err = repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{InstanceName: o.Instance})
		c.RTT = time.Since(start)
		return err
	})
	if err != nil {
		c.closeConns()
		if Refused(err) {
			return nil, &refusedError{target: o.Target, addr: addr, err: err}
		}
		return nil, fmt.Errorf("remote %s: GetCapabilities: %w", o.Target, err)
	}
	if err := c.useCapabilities(caps); err != nil {
		c.closeConns()
		return nil, err
	}
	c.enc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	// Every blob read is checked against its SHA-256 digest, which
	// covers what zstd's own checksum would.
	c.dec, _ = zstd.NewReader(nil, zstd.IgnoreChecksum(true))
	c.CAS = newUploader(c)
	c.reads = c.newReads()
	h.armed.Store(true)
	return c, nil
}

// useCapabilities sets c up for what the server says it offers (caps): an
// error if it has no CAS or no SHA-256; compression as the options allow
// and the server supports; the batch size limit.
func (c *Client) useCapabilities(caps *repb.ServerCapabilities) error {
	o := c.opts
	c.Caps = caps
	cc := caps.GetCacheCapabilities()
	if cc == nil {
		return fmt.Errorf("remote %s: the server has no CAS (no cache capabilities); point --remote at a service that has one "+
			"(Buildbarn: the frontend, bb_storage, not bb_scheduler's client port)", o.Target)
	}
	fns := cc.GetDigestFunctions()
	if len(fns) > 0 && !slices.Contains(fns, repb.DigestFunction_SHA256) {
		return fmt.Errorf("remote %s: the server does not support SHA-256 digests (it offers %v)", o.Target, fns)
	}
	if o.Compression != CompressNone {
		c.zstdRead = slices.Contains(cc.GetSupportedCompressors(), repb.Compressor_ZSTD)
	}
	if o.Compression == CompressAll || o.Compression == CompressAuto {
		c.zstdUpload = c.zstdRead
		c.zstdBatch = slices.Contains(cc.GetSupportedBatchUpdateCompressors(), repb.Compressor_ZSTD)
	}
	c.link = newLink(o.Compression == CompressAuto, c.RTT, time.Now)
	limit := cc.GetMaxBatchTotalSizeBytes()
	switch {
	case limit <= 0:
		limit = unadvertisedBatchLimit
	case limit > grpcMax:
		limit = grpcMax
	}
	c.batchLimit.Store(limit)
	return nil
}

// Down is the *DownError once the service has been found down mid-run,
// else nil. From then on every call fails at once with it.
func (c *Client) Down() error { return c.health.err() }

// OnDown sets what is told, once, if the service is found down mid-run:
// the *DownError. The run sets it before its first call.
func (c *Client) OnDown(report func(err error)) { c.health.report.Store(&report) }

// Close releases the connections.
func (c *Client) Close() error {
	c.dec.Close()
	return c.closeConns()
}

func (c *Client) closeConns() error {
	for _, ec := range c.execConns {
		ec.Close()
	}
	return c.conn.Close()
}

// exec is the execution client for the next execution, the connections
// taken in turn.
func (c *Client) exec() repb.ExecutionClient {
	return c.execs[c.nextExec.Add(1)%uint64(len(c.execs))]
}

// Instance is the instance name.
func (c *Client) Instance() string { return c.opts.Instance }

// ExecEnabled reports whether the server offers remote execution.
func (c *Client) ExecEnabled() bool { return c.Caps.GetExecutionCapabilities().GetExecEnabled() }

// ACUpdateEnabled reports whether the server lets clients write its
// ActionCache. A server that says nothing is taken at its word when it
// refuses a write.
func (c *Client) ACUpdateEnabled() bool {
	u := c.Caps.GetCacheCapabilities().GetActionCacheUpdateCapabilities()
	return u == nil || u.GetUpdateEnabled()
}

// Compression is which transfers use zstd where the server offers it.
type Compression int

const (
	// CompressDownloads reads blobs compressed and uploads them as they
	// are: decompressing is cheap and the server does the compressing,
	// while compressing bitcode for upload costs this machine more CPU
	// than the wire time it saves on a fast network, CPU that a link with
	// hundreds of actions in flight needs (docs/design.md, "Compression").
	CompressDownloads Compression = iota
	// CompressAll compresses uploads too: for slow links.
	CompressAll
	// CompressNone sends and reads every blob as it is.
	CompressNone
)

// Compression describes the compression in use, for messages.
func (c *Client) Compression() string {
	switch {
	case c.link != nil && c.link.auto && c.zstdRead:
		return "zstd where faster (auto)"
	case c.zstdUpload || c.zstdBatch:
		return "zstd both ways"
	case c.zstdRead:
		return "zstd for downloads"
	}
	return "none"
}

// BatchLimit is the largest batch request thindist sends.
func (c *Client) BatchLimit() int64 { return c.batchLimit.Load() }

// lowerBatchLimit lowers the batch limit below a batch of total bytes that
// the server refused as too large, for the rest of the run.
func (c *Client) lowerBatchLimit(total int64) {
	want := max(total/2, minBatchLimit)
	for {
		cur := c.batchLimit.Load()
		if cur <= want || c.batchLimit.CompareAndSwap(cur, want) {
			return
		}
	}
}

func transport(o Options) (string, credentials.TransportCredentials, error) {
	switch {
	case strings.HasPrefix(o.Target, "grpc://"):
		if o.CA != "" || o.Cert != "" {
			return "", nil, fmt.Errorf("--remote %s is plaintext gRPC; use grpcs:// with --remote-ca/--remote-cert", o.Target)
		}
		return strings.TrimPrefix(o.Target, "grpc://"), insecure.NewCredentials(), nil
	case strings.HasPrefix(o.Target, "grpcs://"):
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CA != "" {
			pem, err := os.ReadFile(o.CA)
			if err != nil {
				return "", nil, fmt.Errorf("--remote-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return "", nil, fmt.Errorf("--remote-ca %s: no PEM certificates in it", o.CA)
			}
			cfg.RootCAs = pool
		}
		if (o.Cert == "") != (o.Key == "") {
			return "", nil, fmt.Errorf("--remote-cert and --remote-key go together")
		}
		if o.Cert != "" {
			cert, err := tls.LoadX509KeyPair(o.Cert, o.Key)
			if err != nil {
				return "", nil, fmt.Errorf("--remote-cert/--remote-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		return strings.TrimPrefix(o.Target, "grpcs://"), credentials.NewTLS(cfg), nil
	}
	return "", nil, fmt.Errorf("--remote %q: use grpc://HOST:PORT or grpcs://HOST:PORT", o.Target)
}

// transient reports whether a failed call may succeed if tried again.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// dialRetryable reports whether the first call's failure is worth another
// try: a transient one, unless the host refused the connection. A refused
// connection is known within a round trip and says that nothing listens
// at the address; trying again over dialWindow would only find that again
// (a frontend restarting mid-run is another matter: the calls of a run
// connected once are retried on it, retry).
func dialRetryable(err error) bool { return transient(err) && !Refused(err) }

// Refused reports whether err, a call's, says that the service's host
// refused the connection (ECONNREFUSED: nothing listens at the address).
// gRPC passes the dial's failure on as the text of codes.Unavailable.
func Refused(err error) bool {
	return status.Code(err) == codes.Unavailable &&
		strings.Contains(status.Convert(err).Message(), syscall.ECONNREFUSED.Error())
}

// refusedError is Dial's error when the host refused the connection: what
// gRPC says of it repeats the address and the errno, so it says only
// what it means.
type refusedError struct {
	target, addr string
	err          error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("remote %s: nothing listens at %s (connection refused; not tried again)", e.target, e.addr)
}

func (e *refusedError) Unwrap() error { return e.err }

// dialWindow bounds the retries of the first call.
const dialWindow = 5 * time.Second

var errNotFound = errors.New("not found")
