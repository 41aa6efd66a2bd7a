package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sched/slots"
	"github.com/thindist/thindist/internal/sys/describe"
	"github.com/thindist/thindist/internal/sys/digest"
)

// GroupOptions configures a Grouper.
type GroupOptions struct {
	// Max is the most members of one group (--remote-group); below 2
	// nothing is grouped.
	Max int
	// Small is the longest expected time (executor.Job.Expected, from
	// earlier runs) of an action that is grouped; without history,
	// SmallBytes is the largest module (executor.Job.Weight). Defaults: DefaultGroupSmall,
	// DefaultGroupSmallBytes.
	Small      time.Duration
	SmallBytes int64
	// Warn reports that grouping stopped for the run.
	Warn func(format string, args ...any)
}

// Defaults of GroupOptions. A remote action costs the client a few
// milliseconds of CPU and the cluster a round trip or more of scheduling;
// an action of 200 ms or less (a module of 32 KiB or less without
// history) is where that is a large share.
const (
	DefaultGroupSmall      = 200 * time.Millisecond
	DefaultGroupSmallBytes = 32 << 10
)

// GroupStats are what a Grouper did in a run.
type GroupStats struct {
	Groups  int64 // group executions sent
	Grouped int64 // actions that ran in a group
	Singles int64 // actions sent alone (large ones, leftovers, re-runs)
	Reruns  int64 // members sent alone again after their group failed
	Waiting int64 // actions waiting in a group that has no execution slot yet
}

// Grouper is an executor.Executor that runs small actions several to one
// remote execution (reapi.Group) and others alone, through e.
//
// Groups form only while every execution slot is busy: a small action
// that finds a slot free is sent alone at once, and one that finds none
// joins the group waiting for the next free slot (a new group once that
// one holds Max). So a link of few actions, or a cluster wider than the
// work, sends nothing grouped and pays no wait, while a backlog of
// thousands of tiny actions goes out Max to an execution. Each member
// still gets a result of its own, checked against its own declared
// outputs as an action run alone is, so the caches above store it under
// its own key and Verified judges it on its own. A member whose group
// could not report on it (the group failed as a whole, the result lacks
// its status) is run alone instead; a member that ran and failed is that
// member's failure, with its own output.
//
// Caches above a Grouper look every member up first, so a warm link
// sends no group. The members' results reach the remote ActionCache only
// through that cache layer (under each member's key): use a Grouper only
// where clients may write the ActionCache.
type Grouper struct {
	e     *Executor
	o     GroupOptions
	slots *slots.Pool

	mu  sync.Mutex
	cur *group

	// off is set when a group's script did not run at all (no worker
	// shell): the rest of the run sends every action alone.
	off atomic.Bool

	groups, grouped, singles, reruns, waiting atomic.Int64
}

// NewGrouper returns a Grouper over e whose executions, groups and single
// actions alike, each hold a slot of execs (--remote-jobs of them): it is
// given up to Max times as many actions at once, so that a group per slot
// keeps as many workers busy.
func NewGrouper(e *Executor, execs *slots.Pool, o GroupOptions) *Grouper {
	if o.Small <= 0 {
		o.Small = DefaultGroupSmall
	}
	if o.SmallBytes <= 0 {
		o.SmallBytes = DefaultGroupSmallBytes
	}
	return &Grouper{e: e, o: o, slots: execs}
}

// Stats returns the counts of the run so far.
func (g *Grouper) Stats() GroupStats {
	return GroupStats{Groups: g.groups.Load(), Grouped: g.grouped.Load(), Singles: g.singles.Load(), Reruns: g.reruns.Load(),
		Waiting: g.waiting.Load()}
}

// group is a group being formed or run.
type group struct {
	members []*member
	alive   int // members still waiting; guarded by Grouper.mu
	ctx     context.Context
	cancel  context.CancelFunc
}

// member is one action of a group.
type member struct {
	j executor.Job // its caller's: the action, its outputs, shard, stage and begun
	// done is closed with res/err set, or with alone set: run the action
	// alone.
	done  chan struct{}
	res   *executor.Result
	err   error
	alone bool
	// mu is held while the group writes the member's outputs; gone is set
	// once its caller stopped waiting, after which nothing is written.
	mu   sync.Mutex
	gone bool
}

// Execute implements executor.Executor.
func (g *Grouper) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	if !g.groupable(j) {
		return g.single(ctx, j)
	}
	m := &member{j: j, done: make(chan struct{})}
	grp, alone := g.join(ctx, m)
	if alone {
		// A free slot, taken: nothing waits, nothing to save by waiting.
		defer g.slots.Release()
		g.singles.Add(1)
		return g.e.Execute(ctx, j)
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		m.mu.Lock()
		m.gone = true
		m.mu.Unlock()
		g.leave(grp)
		return nil, ctx.Err()
	}
	if m.alone {
		return g.single(ctx, j)
	}
	return m.res, m.err
}

// Describe names the decorator and wraps the remote executor it groups
// for (describe.Describer).
func (g *Grouper) Describe() describe.Node { return describe.Node{Name: "Grouper", Wraps: []any{g.e}} }

func (g *Grouper) String() string { return describe.Line(g) }

// groupable reports whether j's action is small enough to be grouped, by
// the scheduler's estimates of it (Job.Expected, else Job.Weight).
func (g *Grouper) groupable(j executor.Job) bool {
	if g.o.Max < 2 || g.off.Load() {
		return false
	}
	if j.Expected > 0 {
		return j.Expected <= g.o.Small
	}
	return j.Weight > 0 && j.Weight <= g.o.SmallBytes
}

// single runs a alone in an execution slot.
func (g *Grouper) single(ctx context.Context, j executor.Job) (*executor.Result, error) {
	if err := g.slots.Acquire(ctx, alonePriority); err != nil {
		return nil, err
	}
	defer g.slots.Release()
	g.singles.Add(1)
	return g.e.Execute(ctx, j)
}

// join takes a free execution slot for m (alone: the caller runs it and
// releases the slot) when no group waits for one; otherwise it adds m to
// the group that waits for the next slot, or starts one.
func (g *Grouper) join(ctx context.Context, m *member) (grp *group, alone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	grp = g.cur
	if grp != nil && grp.ctx.Err() != nil {
		grp = nil // every member left: the group will not run for a newcomer
	}
	if grp == nil {
		if g.slots.TryAcquire() {
			return nil, true
		}
		// The group's work serves every member: it ends when the last of
		// them stops waiting, not with the first member's context. Its
		// bytes are no one member's: it moves them with no Meter, and
		// they count in the client's totals only.
		gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		grp = &group{ctx: gctx, cancel: cancel}
		g.cur = grp
		go g.send(grp)
	}
	grp.members = append(grp.members, m)
	grp.alive++
	g.waiting.Add(1)
	if len(grp.members) >= g.o.Max {
		g.cur = nil // full: the next action starts another group
	}
	return grp, false
}

// leave records that a member stopped waiting; the group is cancelled
// when none waits any more.
func (g *Grouper) leave(grp *group) {
	g.mu.Lock()
	grp.alive--
	none := grp.alive == 0
	g.mu.Unlock()
	if none {
		grp.cancel()
	}
}

// send waits for an execution slot for grp, closes it to newcomers and
// runs it.
func (g *Grouper) send(grp *group) {
	defer grp.cancel()
	got := g.slots.Acquire(grp.ctx, groupPriority) == nil // else every member has gone
	g.mu.Lock()
	if g.cur == grp {
		g.cur = nil
	}
	members := grp.members // none joins once it is no longer current
	g.mu.Unlock()
	g.waiting.Add(-int64(len(members)))
	if !got {
		g.alone(members)
		return
	}
	defer g.slots.Release()
	g.run(grp.ctx, members)
}

// alone hands members back to run alone.
func (g *Grouper) alone(ms []*member) {
	for _, m := range ms {
		m.alone = true
		close(m.done)
	}
}

// run executes the members as one group, in the execution slot that send
// holds, and hands each its result. A lone member is handed back: it
// runs alone, on its own context.
func (g *Grouper) run(ctx context.Context, members []*member) {
	if len(members) < 2 {
		g.alone(members)
		return
	}
	e := g.e
	var exes []*reapi.Executable
	var ms []*member
	for _, m := range members {
		ex, err := reapi.BuildExecutable(m.j.Action, e.execOptions(m.j.Shard, false))
		if err != nil {
			m.err = fmt.Errorf("preparing the remote action: %w", err)
			close(m.done)
			continue
		}
		exes, ms = append(exes, ex), append(ms, m)
	}
	if len(ms) < 2 {
		g.alone(ms)
		return
	}
	grp, err := reapi.BuildGroup(exes, reapi.GroupOptions{Timeout: e.o.Timeout})
	if err != nil {
		g.alone(ms)
		return
	}
	g.groups.Add(1)
	g.grouped.Add(int64(len(ms)))
	start := time.Now()
	resp, err := g.execute(ctx, grp, ms)
	if err != nil {
		g.rerun(ms)
		return
	}
	g.collect(ctx, grp, ms, resp, start)
}

// rerun sends members alone after their group could not report on them.
func (g *Grouper) rerun(ms []*member) {
	g.reruns.Add(int64(len(ms)))
	g.alone(ms)
}

// execute uploads the group's inputs and runs it; once the inputs are up,
// each member has begun (executor.Events.Begun: its scheduler's head start and
// preparation window let others go) and is queued, as an action sent
// alone is.
func (g *Grouper) execute(ctx context.Context, grp *reapi.Group, ms []*member) (*repb.ExecuteResponse, error) {
	e := g.e
	if p := e.off.Load(); p != nil {
		return nil, p
	}
	for _, m := range grp.Members {
		if err := e.shipToolchain(ctx, nil, m); err != nil {
			return nil, fmt.Errorf("uploading the compiler's toolchain: %w", err)
		}
	}
	if err := e.c.CAS.Ensure(ctx, nil, grp.Blobs, grp.Files); err != nil {
		return nil, fmt.Errorf("uploading inputs: %w", err)
	}
	// The group's queueing and execution are each member's: their races
	// hear of them, as of an execution of their own.
	var stages executor.Stages
	for _, m := range ms {
		ev := m.j.Notify()
		ev.Begun()
		stages = append(stages, ev)
	}
	stages.Queued()
	resp, _, err := e.run(ctx, nil, grp.Executable, stages)
	return resp, err
}

// collect hands each member the part of the group's result that is its
// own, checked as a result of the member alone (Executor.collect): its
// exit status, its output as stderr, its outputs.
func (g *Grouper) collect(ctx context.Context, grp *reapi.Group, ms []*member, resp *repb.ExecuteResponse, start time.Time) {
	files, err := g.groupFiles(ctx, grp, resp.GetResult())
	if err != nil {
		g.rerun(ms)
		return
	}
	var prevCPU time.Duration
	var again []*member
	statuses := 0
	for i, m := range ms {
		st, ok := files[grp.MemberStatus(i)]
		log, logged := files[grp.MemberLog(i)]
		if !ok || !logged {
			// The script writes both: a result without them is not the
			// script's, and the member's own run decides.
			again = append(again, m)
			continue
		}
		exit, cpu, err := reapi.ParseGroupStatus(st.data)
		if err != nil {
			again = append(again, m)
			continue
		}
		statuses++
		ar := &repb.ActionResult{ExitCode: int32(exit), StderrRaw: log.data}
		for j, p := range grp.Members[i].Outputs {
			if f, ok := files[grp.MemberOutput(i, j)]; ok {
				ar.OutputFiles = append(ar.OutputFiles, &repb.OutputFile{Path: p, Digest: f.d.Proto(), Contents: f.data})
			}
		}
		m.mu.Lock()
		if !m.gone {
			m.res, m.err = g.e.collect(ctx, nil, m.j.Action, grp.Members[i], &repb.ExecuteResponse{Result: ar, CachedResult: resp.CachedResult}, m.j.Out)
			if m.err != nil {
				m.err = fmt.Errorf("remote result rejected: %w", m.err)
			} else {
				// The shell's children's CPU time is cumulative: this
				// member's is the increase since the one before.
				m.res.CPU = max(cpu-prevCPU, 0)
				m.res.Wall = time.Since(start)
			}
		}
		m.mu.Unlock()
		prevCPU = max(prevCPU, cpu)
		close(m.done)
	}
	if statuses == 0 && resp.GetResult().GetExitCode() != 0 {
		// The script did not run (no /bin/sh on the workers?): stop
		// grouping rather than pay a failed group before every action.
		if g.off.CompareAndSwap(false, true) && g.o.Warn != nil {
			g.o.Warn("remote grouping stopped: a group of %d actions ran no member (exit status %d); "+
				"the workers need a POSIX shell at %s (or run without --remote-group)",
				len(ms), resp.GetResult().GetExitCode(), reapi.GroupShell)
		}
	}
	if len(again) > 0 {
		g.rerun(again)
	}
}

// groupFile is a file of a group's result, read.
type groupFile struct {
	d    digest.Digest
	data []byte
}

// groupFiles reads every output file of the group's result, checking it
// against the declared outputs as Executor.collect does.
func (g *Grouper) groupFiles(ctx context.Context, grp *reapi.Group, ar *repb.ActionResult) (map[string]groupFile, error) {
	if ar == nil {
		return nil, errors.New("the response holds no result")
	}
	if len(ar.OutputDirectories)+len(ar.OutputSymlinks)+len(ar.OutputFileSymlinks)+len(ar.OutputDirectorySymlinks) > 0 {
		return nil, errors.New("the result names directories or symlinks, which the group does not declare")
	}
	declared := map[string]bool{}
	for _, p := range grp.Outputs {
		declared[p] = true
	}
	files := map[string]groupFile{}
	var want []digest.Digest
	for _, f := range ar.OutputFiles {
		if err := reapi.CheckOutputPath(f.Path); err != nil {
			return nil, err
		}
		if !declared[f.Path] {
			return nil, fmt.Errorf("the result names %q, which the group does not declare", f.Path)
		}
		d, err := digest.FromProto(f.Digest)
		if err != nil {
			return nil, fmt.Errorf("output %s: %v", f.Path, err)
		}
		files[f.Path] = groupFile{d: d, data: f.Contents}
		if f.Contents == nil || int64(len(f.Contents)) != d.Size {
			want = append(want, d)
		}
	}
	blobs, err := g.e.c.ReadBlobs(ctx, nil, want)
	if err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	for p, f := range files {
		if data, ok := blobs[f.d]; ok {
			f.data = data
		}
		if digest.OfBytes(f.data) != f.d {
			return nil, fmt.Errorf("output %s: contents do not match the digest", p)
		}
		if f.data == nil {
			f.data = []byte{}
		}
		files[p] = f
	}
	return files, nil
}

// The Grouper's execution slots (a slots.Pool) go to an action sent alone
// before a group: those are the large backends, which the scheduler starts
// first because they make the critical path (or members handed back), and
// grouping must never queue them behind a backlog of tiny ones.
const (
	alonePriority = 0
	groupPriority = 1
)
