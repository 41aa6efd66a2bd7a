// Package reapisim simulates a REAPI cluster's timing for the benchmark: a
// reapitest.FakeServer whose Cluster is a Simulator replays recorded
// results on a number of worker slots, after their recorded CPU time, with
// a round-trip time on every RPC and a bandwidth limit on a link shared as
// HTTP/2 shares a connection. It is a SIMULATION of a cluster, not a
// cluster: see Simulation.
package reapisim

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Simulation makes a FakeServer stand for a cluster in a benchmark: it is a
// SIMULATION of a cluster's timing, not a cluster. A recording run executes
// every action once for real (Record) and keeps its outputs and CPU time in
// a Recording; a replay run has Workers worker slots, each of which returns
// a recorded result after the recorded CPU time (an action waits in stage
// QUEUED for a free slot), and adds RTT to every RPC and a shared link of
// BytesPerSecond each way to every message. Nothing else changes: the
// client uploads its inputs, and the results come back through the CAS and
// the action cache as from the default server.
type Simulation struct {
	// Recording holds the recorded actions. Record adds to it; a replay
	// serves from it, and executes (for real) and adds an action it does
	// not hold, which the figures then count in Stats.Unrecorded.
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

// Stats are what a simulation did.
type Stats struct {
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

// A Simulator is a Simulation at work, as a FakeServer's Cluster
// (reapitest.Options.Cluster).
type Simulator struct {
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

// New returns the simulator of sim, for a server that serves zstd if zstd
// is set (reapitest.Options.Zstd): a replay prepares its recorded blobs in
// the forms the server serves, before the clock starts.
func New(sim Simulation, zstd bool) *Simulator {
	m := &Simulator{sim: sim, slots: newSimSlots(max(1, sim.Workers))}
	if m.sim.Recording == nil {
		m.sim.Recording = NewRecording()
	}
	if !m.sim.Record {
		m.sim.Recording.prepare(zstd)
	}
	m.up.bytesPerSecond, m.down.bytesPerSecond = sim.BytesPerSecond, sim.BytesPerSecond
	if sim.SlowFactor > 1 {
		m.slow = m.sim.Recording.longest()
	}
	return m
}

// Stats returns the simulation's figures.
func (m *Simulator) Stats() Stats {
	return Stats{
		Replayed: m.replayed.Load(), Unrecorded: m.unrecorded.Load(), Recorded: m.recorded.Load(),
		PeakBusy: m.peakBusy.Load(), PeakQueued: m.peakQueued.Load(), RTTs: m.rtts.Load(),
		BytesUp: m.up.bytes.Load(), BytesDown: m.down.bytes.Load(), Slowed: m.slowed.Load(),
	}
}

// Recording returns the simulation's recording.
func (m *Simulator) Recording() *Recording { return m.sim.Recording }

// replayTime is how long a replay of rec holds its worker slot: its
// recorded time, times Slowdown, and times SlowFactor too on the slow slot
// (counted in Slowed).
func (m *Simulator) replayTime(rec *recordedAction, slowSlot bool) time.Duration {
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
func (m *Simulator) roundTrip(ctx context.Context) {
	if m.sim.RTT <= 0 {
		return
	}
	m.rtts.Add(1)
	sleepCtx(ctx, m.sim.RTT)
}

// Execute implements reapitest.Cluster: it runs one non-cached execution
// for the simulation, from the recording when it holds the action (and the
// simulation does not record), else for real (x.Run), recorded. It holds a
// worker slot while the action runs, and waits for one in stage QUEUED,
// behind the queued executions of a lower priority value
// (ExecutionPolicy).
func (m *Simulator) Execute(x *reapitest.Execution) *repb.ExecuteResponse {
	s := x.Server
	queuedAt := timestamppb.Now()
	m.queued.Add(1)
	raisePeak(&m.peakQueued, m.queued.Load())
	// x.Ctx ends when the server stops or when no client waits for the
	// operation any more (a race lost): a cancelled operation frees its
	// simulated slot at once, as a real worker's would be killed.
	if !m.slots.acquire(x.Ctx, x.Priority) {
		m.queued.Add(-1)
		return reapitest.StoppedResponse()
	}
	m.queued.Add(-1)
	raisePeak(&m.peakBusy, m.busy.Add(1))
	defer func() { m.busy.Add(-1); m.slots.release() }()
	x.SetExecuting()

	if resp, ok := m.replayGroup(x, queuedAt); ok {
		return resp
	}
	key, err := contentKey(s, x.Action, x.Command)
	if err != nil {
		return &repb.ExecuteResponse{Status: reapitest.StatusOf(err)}
	}
	if rec, ok := m.sim.Recording.get(key); ok && !m.sim.Record {
		// If this is SlowFactor's action and its first execution, the
		// slot it took is the slow one; another execution of the action
		// (a hedge) runs on another slot.
		d := m.replayTime(rec, key == m.slow && m.slowTaken.CompareAndSwap(false, true))
		start := timestamppb.Now()
		if !sleepCtx(x.Ctx, d) {
			return reapitest.StoppedResponse()
		}
		for i, b := range rec.blobs {
			var packed []byte
			if rec.packed != nil {
				packed = rec.packed[i]
			}
			s.KeepBlob(rec.digests[i], b, packed)
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
		return &repb.ExecuteResponse{Result: ar, Status: reapitest.StatusOf(nil)}
	}
	if !m.sim.Record {
		m.unrecorded.Add(1)
	}
	resp, cpu := x.Run()
	if resp.GetStatus().GetCode() == 0 && resp.GetResult().GetExitCode() == 0 {
		if m.sim.Recording.add(s, key, resp.GetResult(), cpu) {
			m.recorded.Add(1)
		}
	}
	return resp
}

func cloneResult(ar *repb.ActionResult) *repb.ActionResult {
	return proto.Clone(ar).(*repb.ActionResult)
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
