package reapitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thindist/thindist/internal/atomicfile"
)

// Simulation makes a FakeServer stand for a cluster in a benchmark: it is a
// SIMULATION of a cluster's timing, not a cluster. A recording run executes
// every action once for real (Record) and keeps its outputs and CPU time in
// a Recording; a replay run has Workers worker slots, each of which returns
// a recorded result after the recorded CPU time (an action waits in stage
// QUEUED for a free slot), and adds RTT to every RPC and a shared link of
// BytesPerSecond each way to every message. Nothing else changes: the
// client uploads its inputs, and the results come back through the CAS and
// the action cache as from the default server. Options.Simulation nil (the
// default) leaves the server as it is without it.
type Simulation struct {
	// Recording holds the recorded actions. Record adds to it; a replay
	// serves from it, and executes (for real) and adds an action it does
	// not hold, which the figures then count in SimulationStats.Unrecorded.
	Recording *Recording

	// Record executes every action for real (on this machine, Workers at a
	// time) and records it, even one the Recording holds already.
	Record bool

	// Workers is the number of worker slots (at least 1).
	Workers int

	// RTT is added to every RPC, once, before the server handles it.
	RTT time.Duration

	// BytesPerSecond is the capacity of the link between client and
	// server, each direction shared by all calls as HTTP/2 shares a
	// connection among its streams: messages cross it in 16 KiB frames,
	// taken in turn, each frame taking its size / BytesPerSecond. 0:
	// unlimited. The size is the protobuf message's, so blobs count as
	// sent (compressed with zstd).
	BytesPerSecond float64

	// SlowFactor, if above 1, makes one worker slot that many times slower
	// for one action: the first execution of the recorded action with the
	// longest CPU time takes SlowFactor times its time in a replay. Any
	// other execution of it (a second one, sent while the first runs) is
	// on another slot and takes its recorded time.
	SlowFactor float64

	// Slowdown, if above 1, makes every worker slot that many times slower:
	// each replayed execution takes Slowdown times its recorded time, as on
	// a cluster of machines slower than the one that recorded (or busy with
	// other builds). SlowFactor's slot is slower still.
	Slowdown float64
}

// SimulationStats are what a simulation did.
type SimulationStats struct {
	Replayed   int64 // executions served from the recording
	Unrecorded int64 // executions a replay had to run for real
	Recorded   int64 // actions added to the recording
	// PeakBusy is the most worker slots busy at once; PeakQueued the most
	// executions waiting for a slot at once.
	PeakBusy, PeakQueued int64
	RTTs                 int64 // RPCs delayed by RTT
	BytesUp, BytesDown   int64 // message bytes through the link each way
	Slowed               int64 // executions slowed by SlowFactor
}

// simulator is a FakeServer's Simulation at work.
type simulator struct {
	sim   Simulation
	slots *simSlots
	up    link
	down  link
	slow  string // digestKey of the action SlowFactor slows, or ""
	// slowTaken is set once an execution of slow has taken the slow slot.
	slowTaken atomic.Bool

	busy, queued           atomic.Int64
	peakBusy, peakQueued   atomic.Int64
	replayed, unrecorded   atomic.Int64
	recorded, slowed, rtts atomic.Int64
}

func newSimulator(sim *Simulation) *simulator {
	if sim == nil {
		return nil
	}
	m := &simulator{sim: *sim, slots: newSimSlots(max(1, sim.Workers))}
	if m.sim.Recording == nil {
		m.sim.Recording = NewRecording()
	}
	m.up.bytesPerSecond, m.down.bytesPerSecond = sim.BytesPerSecond, sim.BytesPerSecond
	if sim.SlowFactor > 1 {
		m.slow = m.sim.Recording.longest()
	}
	return m
}

// SimulationStats returns the simulation's figures (zero without one).
func (s *FakeServer) SimulationStats() SimulationStats {
	m := s.sim
	if m == nil {
		return SimulationStats{}
	}
	return SimulationStats{
		Replayed: m.replayed.Load(), Unrecorded: m.unrecorded.Load(), Recorded: m.recorded.Load(),
		PeakBusy: m.peakBusy.Load(), PeakQueued: m.peakQueued.Load(), RTTs: m.rtts.Load(),
		BytesUp: m.up.bytes.Load(), BytesDown: m.down.bytes.Load(), Slowed: m.slowed.Load(),
	}
}

// Recording returns the simulation's recording (nil without a simulation).
func (s *FakeServer) Recording() *Recording {
	if s.sim == nil {
		return nil
	}
	return s.sim.sim.Recording
}

// replayTime is how long a replay of rec holds its worker slot: its
// recorded time, times Slowdown, and times SlowFactor too on the slow slot
// (counted in Slowed).
func (m *simulator) replayTime(rec *recordedAction, slowSlot bool) time.Duration {
	f := 1.0
	if m.sim.Slowdown > 1 {
		f = m.sim.Slowdown
	}
	if slowSlot {
		f *= m.sim.SlowFactor
		m.slowed.Add(1)
	}
	return time.Duration(float64(rec.CPU) * f)
}

// roundTrip holds an RPC for the simulated round-trip time.
func (m *simulator) roundTrip(ctx context.Context) {
	if m == nil || m.sim.RTT <= 0 {
		return
	}
	m.rtts.Add(1)
	sleepCtx(ctx, m.sim.RTT)
}

// execute runs one non-cached execution for the simulation: from the
// recording when it holds the action (and the simulation does not record),
// else for real through run, recorded. It holds a worker slot while the
// action runs, and waits for one in stage QUEUED, behind the queued
// executions of a lower priority value (ExecutionPolicy).
func (m *simulator) execute(s *FakeServer, op *operation, action *repb.Action, command *repb.Command, instance string, priority int32) *repb.ExecuteResponse {
	queuedAt := timestamppb.Now()
	m.queued.Add(1)
	raisePeak(&m.peakQueued, m.queued.Load())
	// op.ctx ends when the server stops or when no client waits for the
	// operation any more (a race lost): a cancelled operation frees its
	// simulated slot at once, as a real worker's would be killed.
	if !m.slots.acquire(op.ctx, priority) {
		m.queued.Add(-1)
		return stoppedResponse()
	}
	m.queued.Add(-1)
	raisePeak(&m.peakBusy, m.busy.Add(1))
	defer func() { m.busy.Add(-1); m.slots.release() }()
	op.setStage(repb.ExecutionStage_EXECUTING)

	if resp, ok := m.replayGroup(s, action, command, queuedAt); ok {
		return resp
	}
	key, err := s.contentKey(action, command)
	if err != nil {
		return &repb.ExecuteResponse{Status: grpcStatus(err)}
	}
	if rec, ok := m.sim.Recording.get(key); ok && !m.sim.Record {
		// If this is SlowFactor's action and its first execution, the
		// slot it took is the slow one; another execution of the action
		// (a hedge) runs on another slot.
		d := m.replayTime(rec, key == m.slow && m.slowTaken.CompareAndSwap(false, true))
		start := timestamppb.Now()
		if !sleepCtx(op.ctx, d) {
			return stoppedResponse()
		}
		for i, b := range rec.blobs {
			var packed []byte
			if rec.packed != nil {
				packed = rec.packed[i]
			}
			s.cas.keepRecorded(rec.digests[i], b, packed)
		}
		m.replayed.Add(1)
		ar := cloneResult(rec.Result)
		ar.ExecutionMetadata = &repb.ExecutedActionMetadata{
			Worker:                      fmt.Sprintf("reapitest-simulated-worker (%d slots)", m.slots.size),
			QueuedTimestamp:             queuedAt,
			WorkerStartTimestamp:        start,
			ExecutionStartTimestamp:     start,
			ExecutionCompletedTimestamp: timestamppb.Now(),
			WorkerCompletedTimestamp:    timestamppb.Now(),
		}
		return &repb.ExecuteResponse{Result: ar, Status: grpcStatus(nil)}
	}
	if !m.sim.Record {
		m.unrecorded.Add(1)
	}
	var cpu time.Duration
	resp := s.run(s.ctx, instance, action, command, &cpu)
	if resp.GetStatus().GetCode() == 0 && resp.GetResult().GetExitCode() == 0 {
		if m.sim.Recording.add(s, key, resp.GetResult(), cpu) {
			m.recorded.Add(1)
		}
	}
	return resp
}

// contentKey names what an action computes, for the recording (ContentKey).
func (s *FakeServer) contentKey(action *repb.Action, command *repb.Command) (string, error) {
	files := map[string]string{} // root-relative path → digest key
	if err := s.listFiles("", action.GetInputRootDigest(), files); err != nil {
		return "", err
	}
	return ContentKey(action.GetSalt(), command.GetArguments(), command.GetWorkingDirectory(), files, command.GetOutputPaths()), nil
}

// ContentKey names what an action computes, for a Recording: its salt, its
// arguments with every input file they name replaced by the file's digest,
// and the digests of all its input files, but not the names of those files
// nor the ThinLTO index shard (-fthinlto-index=). lld names the files of a
// link (archive members it extracts, index shards) after its process id, so
// the same backend of two links has two action digests; its result does not
// depend on those names. (The shard differs only by the module paths it
// records.) files maps every input file's path, relative to the input root
// and slash-separated, to its digest as "hash/size"; workDir is the
// command's working directory inside the root. A worker that sees only the
// command and its input root on disk computes the same key (bench's replay
// worker, for a real cluster).
func ContentKey(salt []byte, args []string, workDir string, files map[string]string, outputs []string) string {
	const index = "-fthinlto-index="
	skip := ""
	h := sha256.New()
	fmt.Fprintf(h, "salt:%x\x00", salt)
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, index); ok {
			skip = path.Join(workDir, p)
			a = index
		} else if d, ok := files[path.Join(workDir, a)]; ok {
			a = "file:" + d
		}
		fmt.Fprintf(h, "%d:%s\x00", len(a), a)
	}
	var ds []string
	for p, d := range files {
		if p != skip {
			ds = append(ds, d)
		}
	}
	sort.Strings(ds)
	for _, d := range ds {
		fmt.Fprintf(h, "%s\x00", d)
	}
	for _, o := range outputs {
		fmt.Fprintf(h, "out:%s\x00", o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// listFiles adds the files of the input tree d, below dir, to files.
func (s *FakeServer) listFiles(dir string, d *repb.Digest, files map[string]string) error {
	data, ok := s.cas.get(d)
	if !ok {
		return missingBlobsError([]*repb.Digest{d})
	}
	var node repb.Directory
	if err := proto.Unmarshal(data, &node); err != nil {
		return status.Errorf(codes.InvalidArgument, "blob %s is not a Directory: %v", digestKey(d), err)
	}
	for _, f := range node.GetFiles() {
		files[path.Join(dir, f.GetName())] = digestKey(f.GetDigest())
	}
	for _, sub := range node.GetDirectories() {
		if err := s.listFiles(path.Join(dir, sub.GetName()), sub.GetDigest(), files); err != nil {
			return err
		}
	}
	return nil
}

func stoppedResponse() *repb.ExecuteResponse {
	return &repb.ExecuteResponse{Status: grpcStatus(status.Error(codes.Unavailable, "reapitest: server stopped"))}
}

func raisePeak(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// sleepCtx waits d, or less if ctx ends first; it reports whether it waited
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// linkFrame is how much of a message the link carries before it turns to
// the next message waiting: HTTP/2's default frame size (the initial
// SETTINGS_MAX_FRAME_SIZE), in which gRPC's transport takes the concurrent
// streams of a connection in turn.
const linkFrame = 16 << 10

// link is one direction of the simulated network link. Messages share it
// as the streams of an HTTP/2 connection do: frame by frame, in turn, each
// frame taking its size / bytesPerSecond. A small message sent while a
// large one crosses is not held until the large one has crossed whole.
type link struct {
	bytesPerSecond float64
	bytes          atomic.Int64

	mu   sync.Mutex
	free time.Time // when the link has sent every frame queued so far
}

// transfer holds the caller until n bytes have crossed the link, each
// frame queued behind the frames queued before it.
func (l *link) transfer(ctx context.Context, n int) {
	l.bytes.Add(int64(n))
	if l.bytesPerSecond <= 0 || n == 0 {
		return
	}
	var prev time.Time // the end of this message's frame before
	for n > 0 {
		f := min(n, linkFrame)
		n -= f
		now := time.Now()
		l.mu.Lock()
		// A frame starts once the link is free, and not before the
		// message's frame before it has ended: as it was meant to,
		// however late the timer woke this caller, so that a message
		// alone on the link takes its size / bytesPerSecond.
		start := now
		if !prev.IsZero() {
			start = prev
		}
		if start.Before(l.free) {
			start = l.free
		}
		l.free = start.Add(time.Duration(float64(f) / l.bytesPerSecond * float64(time.Second)))
		prev = l.free
		l.mu.Unlock()
		if !sleepCtx(ctx, prev.Sub(now)) {
			return
		}
	}
}

func protoSize(m any) int {
	if pm, ok := m.(proto.Message); ok {
		return proto.Size(pm)
	}
	return 0
}

// unary applies the link to a unary call: the request crosses it before
// the handler runs, the response after.
func (m *simulator) unary(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error) {
	m.up.transfer(ctx, protoSize(req))
	resp, err := handler(ctx, req)
	if err == nil {
		m.down.transfer(ctx, protoSize(resp))
	}
	return resp, err
}

// simStream applies the link to every message of a stream.
type simStream struct {
	grpc.ServerStream
	m *simulator
}

func (ss simStream) RecvMsg(msg any) error {
	if err := ss.ServerStream.RecvMsg(msg); err != nil {
		return err
	}
	ss.m.up.transfer(ss.Context(), protoSize(msg))
	return nil
}

func (ss simStream) SendMsg(msg any) error {
	ss.m.down.transfer(ss.Context(), protoSize(msg))
	return ss.ServerStream.SendMsg(msg)
}

// Recording is what a recording run kept: each action's result, the blobs
// it names (outputs, stdout, stderr) and the CPU time the action took (user
// and system, of the process and the children it waited for). Safe for
// concurrent use.
type Recording struct {
	mu      sync.Mutex
	actions map[string]*recordedAction
}

type recordedAction struct {
	Result *repb.ActionResult
	CPU    time.Duration
	blobs  [][]byte
	// Made by prepare: the blobs' digests, and their zstd forms for a
	// server that serves zstd.
	digests []*repb.Digest
	packed  [][]byte
}

// prepare digests every recorded blob, and compresses it for a server
// that serves zstd, ahead of the replay. A replayed execution then stores
// its outputs in the CAS as they are, and serving one compressed costs no
// more than on a real server that keeps blobs compressed: the simulation
// runs on the client's machine, and compressing every output at every read
// took a third of its CPU (7-Zip) from the client it measures; hashing and
// copying every output at every execution, a sixth.
func (r *Recording) prepare(zstd bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.actions {
		if a.digests == nil {
			a.digests = make([]*repb.Digest, len(a.blobs))
			for i, b := range a.blobs {
				a.digests[i] = digestOf(b)
			}
		}
		if zstd && a.packed == nil {
			a.packed = make([][]byte, len(a.blobs))
			for i, b := range a.blobs {
				a.packed[i] = zstdCompress(b)
			}
		}
	}
}

// NewRecording returns an empty recording.
func NewRecording() *Recording { return &Recording{actions: map[string]*recordedAction{}} }

// Len is the number of recorded actions.
func (r *Recording) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.actions)
}

// CPUTimes returns the recorded CPU time of every action, longest first.
func (r *Recording) CPUTimes() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d []time.Duration
	for _, a := range r.actions {
		d = append(d, a.CPU)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] > d[j] })
	return d
}

func (r *Recording) get(key string) (*recordedAction, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.actions[key]
	return a, ok
}

// longest is the key of the action with the longest CPU time ("" if none).
func (r *Recording) longest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, key := time.Duration(-1), ""
	for k, a := range r.actions {
		if a.CPU > best || (a.CPU == best && k < key) {
			best, key = a.CPU, k
		}
	}
	return key
}

// add records the action key's result, copying the blobs it names from
// the server's CAS; it reports false if one is missing (nothing recorded).
func (r *Recording) add(s *FakeServer, key string, ar *repb.ActionResult, cpu time.Duration) bool {
	var blobs [][]byte
	for _, d := range resultDigests(ar) {
		b, ok := s.cas.get(d)
		if !ok {
			return false
		}
		blobs = append(blobs, b)
	}
	ar = cloneResult(ar)
	ar.ExecutionMetadata = nil
	r.mu.Lock()
	r.actions[key] = &recordedAction{Result: ar, CPU: cpu, blobs: blobs}
	r.mu.Unlock()
	return true
}

// resultDigests are the blobs an ActionResult names.
func resultDigests(ar *repb.ActionResult) []*repb.Digest {
	var ds []*repb.Digest
	for _, f := range ar.GetOutputFiles() {
		ds = append(ds, f.GetDigest())
	}
	for _, d := range ar.GetOutputDirectories() {
		ds = append(ds, d.GetTreeDigest())
	}
	for _, d := range []*repb.Digest{ar.GetStdoutDigest(), ar.GetStderrDigest()} {
		if d != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// recordingFile is a Recording on disk (JSON).
type recordingFile struct {
	Actions []recordingEntry `json:"actions"`
}

type recordingEntry struct {
	Action string   `json:"action"` // the content key (contentKey)
	CPU    int64    `json:"cpu_ns"`
	Result []byte   `json:"result"` // a serialised ActionResult
	Blobs  [][]byte `json:"blobs"`  // the blobs it names, in resultDigests order
}

// Save writes the recording to path (atomically).
func (r *Recording) Save(path string) error {
	r.mu.Lock()
	var f recordingFile
	keys := make([]string, 0, len(r.actions))
	for k := range r.actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := r.actions[k]
		res, err := proto.MarshalOptions{Deterministic: true}.Marshal(a.Result)
		if err != nil {
			r.mu.Unlock()
			return fmt.Errorf("recording %s: action %s: %w", path, k, err)
		}
		f.Actions = append(f.Actions, recordingEntry{Action: k, CPU: int64(a.CPU), Result: res, Blobs: a.blobs})
	}
	r.mu.Unlock()
	data, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("recording %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("recording %s: %w", path, err)
	}
	return nil
}

// LoadRecording reads a recording that Save wrote.
func LoadRecording(path string) (*Recording, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	var f recordingFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	r := NewRecording()
	for _, e := range f.Actions {
		ar := &repb.ActionResult{}
		if err := proto.Unmarshal(e.Result, ar); err != nil {
			return nil, fmt.Errorf("recording %s: action %s: %w", path, e.Action, err)
		}
		ds := resultDigests(ar)
		if len(ds) != len(e.Blobs) {
			return nil, fmt.Errorf("recording %s: action %s names %d blobs, holds %d", path, e.Action, len(ds), len(e.Blobs))
		}
		for i, d := range ds {
			if digestKey(digestOf(e.Blobs[i])) != digestKey(d) {
				return nil, fmt.Errorf("recording %s: action %s: blob %d does not match its digest", path, e.Action, i)
			}
		}
		r.actions[e.Action] = &recordedAction{Result: ar, CPU: time.Duration(e.CPU), blobs: e.Blobs}
	}
	return r, nil
}

// RecordedAction is one action of a Recording, as a worker that replays it
// needs it.
type RecordedAction struct {
	Result *repb.ActionResult
	CPU    time.Duration
	// Blobs holds the blobs the result names, by digest ("hash/size").
	Blobs map[string][]byte
}

// Lookup returns the recorded action with content key key (ContentKey).
func (r *Recording) Lookup(key string) (RecordedAction, bool) {
	a, ok := r.get(key)
	if !ok {
		return RecordedAction{}, false
	}
	ra := RecordedAction{Result: cloneResult(a.Result), CPU: a.CPU, Blobs: map[string][]byte{}}
	for i, d := range resultDigests(a.Result) {
		ra.Blobs[digestKey(d)] = a.blobs[i]
	}
	return ra, true
}

// Split saves every action of r as a recording of its own, dir/<key>.json,
// so that a worker replaying one action reads only that action.
func (r *Recording) Split(dir string) error {
	r.mu.Lock()
	one := make(map[string]*Recording, len(r.actions))
	for k, a := range r.actions {
		one[k] = &Recording{actions: map[string]*recordedAction{k: a}}
	}
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	for k, rec := range one {
		if err := rec.Save(filepath.Join(dir, k+".json")); err != nil {
			return err
		}
	}
	return nil
}
