package record

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sys/digest"
)

// LogLimit bounds Run.Log.
const LogLimit = 64 << 10

// Recorder builds a run's record while it runs: it is a schedule.Observer
// and hears every cache key computed (reapi.Keyer.Observe). Safe for
// concurrent use.
type Recorder struct {
	mu     sync.Mutex
	run    Run
	queued map[*action.Action]time.Time
	keys   map[*action.Action]keyed
	// unusable is why each action's cache entry could not be used.
	unusable map[*action.Action]string
	cmds     map[string]int
	log      []byte
	now      func() time.Time
	hist     *History            // set by Plan
	est      *schedule.Estimates // set by Planned
	ahead    *ReadAhead          // set by ReadAhead
	// alias maps a module's path, as importers' keys name it, to its
	// name when they differ.
	alias map[string]string
}

type keyed struct {
	key   digest.Digest
	parts *reapi.Parts
}

// New starts the record of a run from what is known before it runs (the
// version, command line, directory, entry point, output). Start defaults to
// now, ID and PID to this process's.
func New(run Run) *Recorder {
	r := &Recorder{run: run, queued: map[*action.Action]time.Time{}, keys: map[*action.Action]keyed{},
		unusable: map[*action.Action]string{}, cmds: map[string]int{}, alias: map[string]string{}, now: time.Now}
	r.run.Schema = Schema
	if r.run.Start.IsZero() {
		r.run.Start = r.now()
	}
	if r.run.PID == 0 {
		r.run.PID = os.Getpid()
	}
	if r.run.ID == "" {
		r.run.ID = NewID(r.run.Start, r.run.PID)
	}
	r.run.Contents = map[string]string{}
	return r
}

// Update changes the record's run-level fields (the settings in force, the
// remote totals) under the recorder's lock.
func (r *Recorder) Update(f func(run *Run)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.run)
}

// Phase records a stretch of the run's wall time.
func (r *Recorder) Phase(p Phase) {
	r.Update(func(run *Run) { run.Phases = append(run.Phases, p) })
}

// Key implements reapi.Keyer.Observe.
func (r *Recorder) Key(a *action.Action, key digest.Digest, parts *reapi.Parts) {
	r.mu.Lock()
	r.keys[a] = keyed{key, parts}
	r.mu.Unlock()
}

// Unusable implements cache.Options.Unusable: a's entry was found in a
// cache and could not be used, for the reason err; the record explains
// its compile so. r may be nil (no record is kept).
func (r *Recorder) Unusable(a *action.Action, err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.unusable[a] = err.Error()
	r.mu.Unlock()
}

// ID is the run's ID, "" for a nil r (no record is kept).
func (r *Recorder) ID() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run.ID
}

// Planned implements schedule.Observer: the record's actions are sized
// for the run at once (grown by doubling, a large record would hold its
// old and new arrays together at the peak of the run).
func (r *Recorder) Planned(n int, est *schedule.Estimates) {
	r.mu.Lock()
	r.est = est
	if more := n - len(r.run.Actions); more > 0 {
		r.run.Actions = slices.Grow(r.run.Actions, more)
	}
	r.mu.Unlock()
}

// Started implements schedule.Observer.
func (r *Recorder) Started(a *action.Action, _ int) {
	now := r.now()
	r.mu.Lock()
	r.queued[a] = now
	r.mu.Unlock()
}

// Finished implements schedule.Observer. The scheduler calls it once the
// outputs are in place, so their sizes are read here.
func (r *Recorder) Finished(a *action.Action, slot int, res *executor.Result, err error) {
	end := r.now()
	rec := Action{Module: action.ModuleName(a.ID), Output: a.Outputs[0].Path, Size: r.weight(a), Slot: slot}
	if rec.Module != a.ID {
		rec.ID = a.ID
	}
	begin := end
	if res != nil {
		begin = end.Add(-res.Wall)
		rec.CPU = res.CPU.Microseconds()
		rec.MaxRSS = res.MaxRSS
		rec.SetBy(res.By)
		rec.NotWorker = res.NotWorker
		rec.Raced = res.Race.Twice()
		rec.BytesUp, rec.BytesDown = res.BytesUp, res.BytesDown
		switch res.Where {
		case executor.LocalCache:
			rec.Where = WhereLocalCache
		case executor.RemoteCache:
			rec.Where = WhereRemoteCache
		case executor.Remote:
			rec.Where = WhereRemote
		default:
			rec.Where = WhereLocal
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		rec.Where = WhereStopped
	case err != nil:
		rec.Where, rec.Error = WhereFailed, err.Error()
	default:
		if res != nil && len(res.OutputDigests) > 0 {
			rec.ObjectSize = res.OutputDigests[0].Size // known: no stat
		} else if fi, serr := os.Stat(a.Abs(a.Outputs[0].Path)); serr == nil {
			rec.ObjectSize = fi.Size()
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	queued, ok := r.queued[a]
	if !ok {
		queued = begin
	}
	delete(r.queued, a)
	if begin.Before(queued) {
		begin = queued
	}
	rec.Queued = queued.Sub(r.run.Start).Microseconds()
	rec.Begin = begin.Sub(r.run.Start).Microseconds()
	rec.End = end.Sub(r.run.Start).Microseconds()
	if k, ok := r.keys[a]; ok {
		delete(r.keys, a)
		r.addKey(&rec, k)
	}
	rec.CacheError = r.unusable[a]
	delete(r.unusable, a)
	if rec.Compiled() && rec.Key != "" && (r.run.LocalCache || r.run.Remote != "") {
		// A miss, which Finish explains from the modules' last records:
		// they are read now, while the run compiles.
		r.hist.startLast()
	}
	r.run.Actions = append(r.run.Actions, rec)
}

// addKey stores the key's parts in rec and the run; r.mu is held.
func (r *Recorder) addKey(rec *Action, k keyed) {
	p := k.parts
	if p.NotCached != "" {
		rec.NotCached = p.NotCached
		return
	}
	rec.Key = k.key.HexHash()
	id := strings.Join(p.Args, "\x00")
	i, ok := r.cmds[id]
	if !ok {
		i = len(r.run.Commands)
		r.cmds[id] = i
		r.run.Commands = append(r.run.Commands, p.Args)
	}
	rec.Command = i
	rec.Compiler = p.Compiler
	rec.Env = p.Env
	rec.Platform = p.Platform
	rec.Index = p.Index
	rec.Order = p.Order
	for name, d := range p.Inputs {
		r.run.Contents[name] = d
		if name != p.Module {
			rec.Imports = append(rec.Imports, name)
		}
	}
	rec.Content = p.Inputs[p.Module]
	if p.Module != "" && p.Module != rec.Module {
		// The module's path differs from its name (thindist link
		// unpacks archive members into its work directory): importers
		// name it by its path, which Finish translates.
		r.alias[p.Module] = rec.Module
	}
}

// LogWriter returns a writer whose text goes into the record's log (what
// thindist printed): whole lines only, a terminal's progress line (drawn
// with "\r\x1b[K") left out, at most LogLimit bytes.
func (r *Recorder) LogWriter() *LogWriter { return &LogWriter{r: r} }

// LogWriter is Recorder.LogWriter's writer.
type LogWriter struct {
	r       *Recorder
	partial []byte
}

func (w *LogWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		nl := bytes.IndexByte(w.partial, '\n')
		if nl < 0 {
			break
		}
		line := w.partial[:nl+1]
		if k := bytes.LastIndex(line, []byte("\x1b[K")); k >= 0 {
			line = line[k+3:]
		}
		w.r.mu.Lock()
		if room := LogLimit - len(w.r.log); room > 0 {
			w.r.log = append(w.r.log, line[:min(room, len(line))]...)
		}
		w.r.mu.Unlock()
		w.partial = w.partial[nl+1:]
	}
	return len(p), nil
}

// Finish ends the record at end, with the run's error, and explains each
// compiled action's miss against the history Plan read. It is the
// recorder's last call: the run it returns takes over the recorder's
// actions (sorted and translated in place, not copied: the copy was the
// largest allocation of a large run's end).
func (r *Recorder) Finish(end time.Time, runErr error) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.run
	r.run.Actions = nil
	run.End = end
	if runErr != nil {
		run.Error = runErr.Error()
	}
	run.Log = string(r.log)
	sortActions(run.Actions)
	run.Contents = map[string]string{}
	for name, d := range r.run.Contents {
		run.Contents[r.name(name)] = d
	}
	for i := range run.Actions {
		imps := make([]string, len(run.Actions[i].Imports))
		for k, m := range run.Actions[i].Imports {
			imps[k] = r.name(m)
		}
		sortStrings(imps)
		run.Actions[i].Imports = imps
	}
	r.hist.Explain(&run)
	return &run
}

// ReadAhead begins reading the newest record of the run's directory in
// store, for Plan: it needs nothing from the job file, and reading it (a
// large link's record is large) would otherwise wait for the job file to
// be read, then delay the first backend. Plan, given the same store, uses
// it.
func (r *Recorder) ReadAhead(store *Store) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ahead = store.readAhead(r.run.Dir)
}

// Plan reads the history of this run's modules from store and returns
// each action's expected duration from it (History.Expect), by their
// modules' sizes (schedule.Weigh); Finish explains the misses against the
// same history.
func (r *Recorder) Plan(store *Store, actions []*action.Action, sizes map[*action.Action]int64) map[*action.Action]time.Duration {
	modules := make([]string, len(actions))
	for i, a := range actions {
		modules[i] = action.ModuleName(a.ID)
	}
	r.mu.Lock()
	dir := r.run.Dir
	ahead := r.ahead
	r.mu.Unlock()
	if ahead != nil {
		<-ahead.done
	}
	h := store.history(dir, modules, ahead)
	expected, n := h.Expect(actions, sizes)
	r.mu.Lock()
	r.hist = h
	r.run.Ordered = n
	r.mu.Unlock()
	return expected
}

// weight is a's module's size as the scheduler weighed it.
func (r *Recorder) weight(a *action.Action) int64 {
	r.mu.Lock()
	est := r.est
	r.mu.Unlock()
	return est.Weight(a)
}

// Snapshot returns the run-level fields recorded so far (no actions), the
// log included.
func (r *Recorder) Snapshot() Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.run
	run.Actions, run.Commands, run.Contents = nil, nil, nil
	run.Log = string(r.log)
	return run
}

// name is the name of the module at path; r.mu is held.
func (r *Recorder) name(path string) string {
	if n, ok := r.alias[path]; ok {
		return n
	}
	return path
}
