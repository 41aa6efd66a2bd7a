package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/server"
	"github.com/thindist/thindist/internal/testsupport/reapisim"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Issue 10's figures: thindist on a SIMULATED cluster. This is a simulation,
// not a cluster: the REAPI test double in its simulation mode
// (reapisim.Simulation), in a process of its own (bench/internal/server), on
// loopback. A recording link executes every action once for real, keeping
// its outputs and CPU time; in the replay links W simulated worker slots
// return each recorded result after the recorded CPU time (actions queue for
// a free slot), every RPC takes an injected round-trip time, and every
// message crosses a link of limited bandwidth shared by all calls. The link
// wall time is compared with the ideal,
//
//	lld's own side + max(largest backend, Σ backends / W)
//
// (lld's own side measured in the same link, as the link's wall time minus
// the distributor process's; the backends are the recording's CPU times),
// and with lld's in-process ThinLTO on this machine's cores.

// recordingMeta is what the recording link found, kept beside a recording
// that -cluster-recordings keeps for later runs.
type recordingMeta struct {
	Backends      []time.Duration `json:"backends"`
	Recorded      int             `json:"recorded"`
	KeptLocal     int             `json:"kept_local"`
	RecordingWall time.Duration   `json:"recording_wall"`
	// InProcess are the in-process links of the same objects (they do not
	// depend on thindist).
	InProcess []time.Duration `json:"in_process,omitempty"`
}

// measureInProcess times lld's in-process ThinLTO on this machine's cores.
func (res *clusterResult) measureInProcess(ctx context.Context, t *tools, o *options, p *project, out string) error {
	for i := 0; i < max(1, o.clusterRuns); i++ {
		wall, err := methodLink(ctx, t, o, p, methods[inProcess], out)
		if err != nil {
			return fmt.Errorf("in-process link: %w", err)
		}
		res.inProcess = append(res.inProcess, wall)
		fmt.Fprintf(os.Stderr, "bench: %s in-process ThinLTO: %s\n", p.build.Name, sec(wall))
	}
	return nil
}

// methodLink links p into out with m on this machine, once it is quiet,
// checks the binary, and returns the link's wall time.
func methodLink(ctx context.Context, t *tools, o *options, p *project, m method, out string) (time.Duration, error) {
	b := p.build
	os.Remove(filepath.Join(b.Dir, out))
	prog, args := m.command(t, b, o.jobs, out)
	tm, err := quietTimed(ctx, o, o.jobs, b.Dir, nil, prog, args...)
	if err == nil {
		err = p.check(ctx, filepath.Join(b.Dir, out))
	}
	return tm.wall, err
}

// record makes the recording at path: every action executed for real, as
// many at a time as this machine has cores, so that their CPU times are
// those of a machine not oversubscribed; or, with -cluster-recordings, copies
// the one a run before made there. The replays may add to the copy at path
// (actions thindist kept local when recording); the backends of the ideal
// stay those of the recording link.
func (res *clusterResult) record(ctx context.Context, t *tools, o *options, p *project, dir, out, path string) error {
	var kept, keptMeta string
	if o.clusterRecordings != "" {
		kept = filepath.Join(o.clusterRecordings, p.build.Name+".json")
		keptMeta = filepath.Join(o.clusterRecordings, p.build.Name+".meta.json")
		var m recordingMeta
		mb, err := os.ReadFile(keptMeta)
		if err == nil {
			err = json.Unmarshal(mb, &m)
		} else if os.IsNotExist(err) {
			// A recording kept by hand: every action recorded.
			var r *reapisim.Recording
			if r, err = reapisim.LoadRecording(kept); err == nil {
				m.Backends = r.CPUTimes()
				m.Recorded = len(m.Backends)
			}
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			data, err := os.ReadFile(kept)
			if err == nil {
				err = os.WriteFile(path, data, 0o644)
			}
			if err != nil {
				return err
			}
			res.backends, res.recorded, res.keptLocal, res.recordingWall = m.Backends, m.Recorded, m.KeptLocal, m.RecordingWall
			res.inProcess = m.InProcess
			fmt.Fprintf(os.Stderr, "bench: %s cluster: the recording of an earlier run (%s)\n", p.build.Name, kept)
			if len(res.inProcess) == 0 {
				return res.measureInProcess(ctx, t, o, p, out)
			}
			return nil
		}
	}
	if err := res.measureInProcess(ctx, t, o, p, out); err != nil {
		return err
	}
	os.Remove(path)
	args := []string{fmt.Sprintf("--remote-jobs=%d", runtime.NumCPU())}
	if has, _ := thindistHas(ctx, t, "--remote-local-jobs"); has {
		// Every action to the recording server (no hybrid local side).
		args = append(args, "--remote-local-jobs=0")
	}
	rec, err := clusterLink(ctx, t, o, p, dir, out, server.SimConfig{Recording: path, Record: true, Workers: runtime.NumCPU()}, "", args...)
	if err != nil {
		return fmt.Errorf("recording link: %w", err)
	}
	res.recordingWall = rec.wall
	loaded, err := reapisim.LoadRecording(path)
	if err != nil {
		return err
	}
	res.backends = loaded.CPUTimes()
	res.recorded = len(res.backends)
	local, err := localBackends(filepath.Join(dir, "trace.json"))
	if err != nil {
		return err
	}
	res.keptLocal = len(local)
	res.backends = append(res.backends, local...)
	if kept == "" {
		return nil
	}
	mb, err := json.Marshal(recordingMeta{Backends: res.backends, Recorded: res.recorded, KeptLocal: res.keptLocal,
		RecordingWall: res.recordingWall, InProcess: res.inProcess})
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(o.clusterRecordings, 0o755)
	}
	if err == nil {
		err = os.WriteFile(kept, data, 0o644)
	}
	if err == nil {
		err = os.WriteFile(keptMeta, mb, 0o644)
	}
	return err
}

// clusterPoint is one point of the grid.
type clusterPoint struct {
	workers int
	rtt     time.Duration
	bps     float64 // bits per second
	slow    bool    // one worker slot 10× slower for the longest action
	noRace  bool    // thindist --no-race
	group   int     // thindist --remote-group=N (0: not given)
	// slowdown, above 1, makes every worker slot that many times slower
	// than the recording (a cluster of slower machines).
	slowdown float64
}

// simConfig is the simulation server's configuration for a replay of
// recording at p.
func (p clusterPoint) simConfig(recording string, slowFactor float64) server.SimConfig {
	c := server.SimConfig{Recording: recording, Workers: p.workers, RTT: p.rtt, BitsPerSecond: p.bps, Slowdown: p.slowdown}
	if p.slow {
		c.SlowFactor = slowFactor
	}
	return c
}

// vsLocalPoints are the clusters a cold remote link must not be slower on
// than thindist on this machine alone (issue 10: "A cold remote link is
// never slower than a local-only link, even when the cluster is slow or
// has one worker"): one worker slot, and 16 slots each ten times slower
// than the recording behind a long round trip. Both fall short of this
// machine's own cores for some links, which is the point: thindist keeps
// compiling here too, and races what the cluster is slow to return.
var vsLocalPoints = []clusterPoint{
	{workers: 1, rtt: 5 * time.Millisecond, bps: 1e9},
	{workers: 16, rtt: 25 * time.Millisecond, bps: 1e9, slowdown: 10},
}

func (p clusterPoint) String() string {
	s := fmt.Sprintf("W=%d RTT=%s %s", p.workers, p.rtt, gbit(p.bps))
	if p.slow {
		s += ", one slot slow"
	}
	if p.noRace {
		s += ", --no-race"
	}
	if p.group > 0 {
		s += fmt.Sprintf(", --remote-group=%d", p.group)
	}
	if p.slowdown > 1 {
		s += fmt.Sprintf(", every slot %g× slower", p.slowdown)
	}
	return s
}

func gbit(bps float64) string { return strconv.FormatFloat(bps/1e9, 'f', -1, 64) + " Gbit/s" }

// clusterRun is one replay link.
type clusterRun struct {
	wall time.Duration // the whole link
	dist time.Duration // the distributor process
	self time.Duration // thindist's own CPU
	// selfSystem is the kernel's part of self: on a file system whose
	// file creation is slow it can be a large one (bench/history/JOURNAL.md).
	selfSystem time.Duration
	steal      time.Duration // the VM's steal time during the link
	// server is the simulated cluster's CPU during the link: it shares
	// this machine's cores with thindist and lld, which a real cluster
	// would not.
	server  time.Duration
	sim     reapisim.Stats
	stats   reapitest.Stats
	summary string
	// output is the link's whole output.
	output string
	others float64
}

func (r clusterRun) lldSide() time.Duration { return max(0, r.wall-r.dist) }

// remoteActions is how many actions the simulated cluster executed.
func (r clusterRun) remoteActions() int64 { return r.sim.Replayed + r.sim.Unrecorded }

type clusterResult struct {
	inProcess []time.Duration
	jobs      int
	// The backends: the recording's CPU times, and the local wall times
	// (thindist's trace of the recording link) of the actions it kept on
	// this machine.
	backends      []time.Duration
	recorded      int
	keptLocal     int
	recordingWall time.Duration
	points        []clusterPoint
	runs          [][]clusterRun // per point
	raceFlag      bool           // thindist has --no-race
	// localOnly are the links with thindist on this machine alone, and
	// vsLocal the cold remote links on each of vsLocalPoints, interleaved
	// with them.
	localOnly []time.Duration
	vsLocal   [][]clusterRun
	// vsLocalSkipped says why the comparison was left out, if it was.
	vsLocalSkipped string
	remoteJobs     string // what thindist's --help says of --remote-jobs' default
	// compress are the links of the compression sweep behind a relay.
	compress []compressRun
}

func (r *clusterResult) largestAndSum() (largest, sum time.Duration) {
	for _, d := range r.backends {
		largest = max(largest, d)
		sum += d
	}
	return
}

// ideal is lld's side of run plus the backends' critical path on W slots.
func (r *clusterResult) ideal(p clusterPoint, run clusterRun) time.Duration {
	largest, sum := r.largestAndSum()
	return run.lldSide() + max(largest, sum/time.Duration(p.workers))
}

// parseDurations reads a comma-separated list such as "0.2ms,5ms,25ms".
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (o *options) clusterGrid(raceFlag bool) ([]clusterPoint, error) {
	var ws []int
	for _, f := range strings.Split(o.clusterWorkers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 {
			return nil, fmt.Errorf("-cluster-workers %q: want positive integers", o.clusterWorkers)
		}
		ws = append(ws, w)
	}
	rtts, err := parseDurations(o.clusterRTTs)
	if err != nil {
		return nil, fmt.Errorf("-cluster-rtt: %v", err)
	}
	gbits, err := parseFloats(o.clusterGbits)
	if err != nil {
		return nil, fmt.Errorf("-cluster-gbits: %v", err)
	}
	var pts []clusterPoint
	for _, w := range ws {
		for _, rtt := range rtts {
			for _, g := range gbits {
				pts = append(pts, clusterPoint{workers: w, rtt: rtt, bps: g * 1e9})
				if o.clusterGroup > 1 {
					pts = append(pts, clusterPoint{workers: w, rtt: rtt, bps: g * 1e9, group: o.clusterGroup})
				}
			}
		}
	}
	if o.clusterSlow > 1 {
		// The slow worker at the middle of the grid.
		mid := clusterPoint{workers: ws[len(ws)/2], rtt: rtts[len(rtts)/2], bps: gbits[0] * 1e9, slow: true}
		pts = append(pts, mid)
		if raceFlag {
			mid.noRace = true
			pts = append(pts, mid)
		}
	}
	return pts, nil
}

// thindistHas reports whether thindist's --help mentions flag.
func thindistHas(ctx context.Context, t *tools, flag string) (bool, string) {
	out, _ := exec.CommandContext(ctx, t.thindist, "--help").CombinedOutput()
	return strings.Contains(string(out), flag), string(out)
}

func benchCluster(ctx context.Context, t *tools, o *options, p *project) (*clusterResult, error) {
	b := p.build
	raceFlag, help := thindistHas(ctx, t, "--no-race")
	res := &clusterResult{jobs: o.jobs, raceFlag: raceFlag, remoteJobs: flagDefault(help, "--remote-jobs")}
	pts, err := o.clusterGrid(raceFlag)
	if err != nil {
		return nil, err
	}
	res.points = pts
	res.runs = make([][]clusterRun, len(pts))
	dir := filepath.Join(o.work, "cluster-"+b.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := "bench-cluster.out"

	recording := filepath.Join(dir, "recording.json")
	if err := res.record(ctx, t, o, p, dir, out, recording); err != nil {
		return nil, err
	}
	largest, sum := res.largestAndSum()
	fmt.Fprintf(os.Stderr, "bench: %s cluster recording: %d actions recorded, %d kept on this machine, largest %s, Σ %s, link %s\n",
		b.Name, res.recorded, res.keptLocal, sec(largest), sec(sum), sec(res.recordingWall))

	for i, pt := range pts {
		for run := 0; run < max(1, o.clusterRuns); run++ {
			if err := res.runPoint(ctx, t, o, p, dir, out, recording, pt, i, run); err != nil {
				return nil, err
			}
		}
	}
	if o.clusterVsLocal > 0 {
		if err := res.measureVsLocal(ctx, t, o, p, dir, out, recording); err != nil {
			return nil, err
		}
	}
	if o.clusterCompress != "" {
		if err := res.measureCompress(ctx, t, o, p, dir, out, recording); err != nil {
			return nil, err
		}
	}
	if o.clusterPprof != "" {
		if err := res.profileWidest(ctx, t, o, p, dir, out, recording, pts); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runPoint links p once (run) against the simulated cluster of grid point
// pt (the i-th), checks that the replay simulated what it should, and keeps
// and prints the run's figures.
func (res *clusterResult) runPoint(ctx context.Context, t *tools, o *options, p *project, dir, out, recording string, pt clusterPoint, i, run int) error {
	b := p.build
	c := pt.simConfig(recording, o.clusterSlow)
	var extra []string
	if pt.noRace {
		extra = append(extra, "--no-race")
	}
	if pt.group > 0 {
		extra = append(extra, fmt.Sprintf("--remote-group=%d", pt.group))
	}
	r, err := clusterLink(ctx, t, o, p, dir, out, c, "", extra...)
	if err != nil {
		return fmt.Errorf("%s: %w", pt, err)
	}
	// A replay that ran many actions for real measured this
	// machine's compiles, not the simulated cluster: the recording
	// no longer matches the objects (a rebuild that is not the same
	// bit for bit, another compiler). A few are expected: actions
	// the recording link kept on this machine run for real the first
	// time a replay sends them, and are recorded then.
	if r.sim.Unrecorded*20 > int64(max(res.recorded, 1)) {
		src := recording
		if o.clusterRecordings != "" {
			src = filepath.Join(o.clusterRecordings, b.Name+".json")
		}
		return fmt.Errorf("%s: %d of the link's executions were not in the recording and ran for real on this machine, "+
			"so its figures are not the simulation's: the objects changed since the recording was made; remove %s to record again",
			pt, r.sim.Unrecorded, src)
	}
	res.runs[i] = append(res.runs[i], r)
	// With -cluster-traces, each point's trace stays, for the
	// per-action costs.
	keptTrace := "not kept (-cluster-traces)"
	if o.clusterTraces {
		keptTrace = filepath.Join(dir, fmt.Sprintf("trace-%d-%d.json", i, run))
		os.Rename(filepath.Join(dir, "trace.json"), keptTrace)
	}
	id := res.ideal(pt, r)
	fmt.Fprintf(os.Stderr, "bench: %s cluster %s: %s, ideal %s (lld %s), wall/ideal %.3f, thindist CPU %.3f ms/remote action (system %.3f), simulated server's CPU %.3f ms/action, %d replayed, %d unrecorded, "+
		"peak %d slots busy, %d queued on the server, VM steal %s, trace %s\n  %s\n",
		b.Name, pt, sec(r.wall), sec(id), sec(r.lldSide()), ratio(r.wall, id),
		perAction(r.self, r.remoteActions()), perAction(r.selfSystem, r.remoteActions()), perAction(r.server, r.remoteActions()), r.sim.Replayed, r.sim.Unrecorded, r.sim.PeakBusy, r.sim.PeakQueued, r.steal, keptTrace, r.summary)
	return nil
}

// profileWidest links p once more with the distributor profiled, at the
// last point of the plain grid: the widest cluster, the longest round
// trip, the narrowest link.
func (res *clusterResult) profileWidest(ctx context.Context, t *tools, o *options, p *project, dir, out, recording string, pts []clusterPoint) error {
	b := p.build
	pt := pts[0]
	for _, q := range pts {
		if !q.slow {
			pt = q
		}
	}
	prof, err := filepath.Abs(filepath.Join(o.clusterPprof, b.Name+".pprof"))
	if err == nil {
		err = os.MkdirAll(filepath.Dir(prof), 0o755)
	}
	if err != nil {
		return err
	}
	c := pt.simConfig(recording, o.clusterSlow)
	var extra []string
	if pt.group > 0 {
		extra = append(extra, fmt.Sprintf("--remote-group=%d", pt.group))
	}
	r, err := clusterLink(ctx, t, o, p, dir, out, c, prof, extra...)
	if err != nil {
		return fmt.Errorf("profiled link: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: %s cluster %s, distributor profiled into %s: %s, thindist CPU %.3f ms/remote action (go tool pprof -top %[3]s; allocations: %[3]s.allocs)\n",
		b.Name, pt, prof, sec(r.wall), perAction(r.self, r.remoteActions()))
	return nil
}

// measureVsLocal links p with thindist on this machine alone (cold, as
// methods[thindist]) and cold with --remote against each of
// vsLocalPoints, o.clusterVsLocal times each, interleaved so that a drift
// of the machine's speed touches both sides alike; or, for a project whose
// recorded backends take longer than o.clusterVsLocalMax on this machine's
// cores, says why not (vsLocalSkipped).
func (res *clusterResult) measureVsLocal(ctx context.Context, t *tools, o *options, p *project, dir, out, recording string) error {
	b := p.build
	_, sum := res.largestAndSum()
	if here := sum / time.Duration(max(1, o.jobs)); here > o.clusterVsLocalMax {
		res.vsLocalSkipped = fmt.Sprintf("its recorded backends take %s on %d cores, over -cluster-vs-local-max %s", sec(here), o.jobs, o.clusterVsLocalMax)
		fmt.Fprintf(os.Stderr, "bench: %s: not compared with this machine alone: %s\n", b.Name, res.vsLocalSkipped)
		return nil
	}
	res.vsLocal = make([][]clusterRun, len(vsLocalPoints))
	for run := 0; run < o.clusterVsLocal; run++ {
		alone, err := methodLink(ctx, t, o, p, methods[thindist], out)
		if err != nil {
			return fmt.Errorf("local-only link: %w", err)
		}
		res.localOnly = append(res.localOnly, alone)
		fmt.Fprintf(os.Stderr, "bench: %s thindist on this machine alone: %s\n", b.Name, sec(alone))
		for i, pt := range vsLocalPoints {
			r, err := clusterLink(ctx, t, o, p, dir, out, pt.simConfig(recording, o.clusterSlow), "")
			if err != nil {
				return fmt.Errorf("%s: %w", pt, err)
			}
			res.vsLocal[i] = append(res.vsLocal[i], r)
			fmt.Fprintf(os.Stderr, "bench: %s cluster %s: %s against %s alone, %d executed remotely (%d unrecorded), thindist CPU %s, simulated server's CPU %s; %s\n",
				b.Name, pt, sec(r.wall), sec(alone), r.remoteActions(), r.sim.Unrecorded, sec(r.self), sec(r.server), r.summary)
		}
	}
	return nil
}

func perAction(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond) / float64(n)
}

// flagDefault digs a flag's default out of thindist's --help text.
func flagDefault(help, flag string) string {
	i := strings.Index(help, flag+" ")
	if i < 0 {
		return "?"
	}
	rest := help[i:]
	j := strings.Index(rest, "default ")
	k := strings.Index(rest[1:], "\n  -")
	if j < 0 || (k >= 0 && j > k) {
		return "?"
	}
	d := rest[j+len("default "):]
	if e := strings.IndexAny(d, ")\n"); e >= 0 {
		d = d[:e]
	}
	return d
}
