package record

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// History is what earlier runs in the same directory recorded of the
// modules of this one: the last compile time of each (to order the work),
// and on demand its last record (to explain a miss).
type History struct {
	took map[string]time.Duration

	// For the last records, read by loadLast once a miss needs them.
	store    *Store
	dir      string
	want     map[string]bool
	lastOnce sync.Once
	lastDone chan struct{}   // closed once last is read (startLast)
	last     map[string]past // module -> its newest record
}

// Bounds of History's reading.
const (
	historyRuns  = 5
	historyReads = 20
)

type past struct {
	run *Run
	act *Action
}

// History reads what the records of runs in dir say of modules, newest
// first, until every module is found, or it has read historyRuns of that
// directory's records or historyReads records in all (a module new to the
// link must not make every link read every record). It reads each record's
// compile times only (Run.Times, at its head: a large link's record is
// megabytes of JSON); the records
// themselves are read only if a miss needs explaining (Explain). A record
// that cannot be read is skipped: history only ever improves a run.
func (s *Store) History(dir string, modules []string) *History {
	return s.history(dir, modules, nil)
}

// history is History with the newest record of dir already read (ahead),
// if it is not nil.
func (s *Store) history(dir string, modules []string, ahead *ReadAhead) *History {
	h := &History{took: map[string]time.Duration{}, store: s, dir: dir, want: map[string]bool{}, last: map[string]past{}}
	for _, m := range modules {
		h.want[m] = true
	}
	s.recent(func(path string) (same, done bool) {
		var times map[string]int64
		var err error
		if ahead != nil && ahead.path == path {
			times, same = ahead.times, true
		} else {
			times, same, err = readTimes(path, dir)
		}
		if err != nil || !same {
			return false, false
		}
		for m, us := range times {
			if _, seen := h.took[m]; h.want[m] && !seen {
				h.took[m] = time.Duration(us) * time.Microsecond
			}
		}
		return true, len(h.took) == len(h.want)
	})
	return h
}

// recent calls visit with the paths of the newest records, newest first,
// within History's bounds: historyReads records in all, historyRuns of
// them records of the directory asked for (visit says which are), until
// visit says it is done.
func (s *Store) recent(visit func(path string) (same, done bool)) {
	es, _ := s.list(false) // a record removed meanwhile is skipped as unreadable
	runs := 0
	for i := len(es) - 1; i >= 0 && i >= len(es)-historyReads && runs < historyRuns; i-- {
		same, done := visit(es[i].Path)
		if same {
			runs++
		}
		if done {
			return
		}
	}
}

// readTimes reads the compile times the record at path kept (Run.Times)
// if it is a record of dir (ok), from its head alone; a record written
// before records kept them is read whole.
func readTimes(path, dir string) (times map[string]int64, ok bool, err error) {
	h, err := recordHead(path, dir)
	d, times := h.dir, h.times
	if err != nil || d != dir {
		return nil, false, err
	}
	if times == nil {
		run, err := readFile(path)
		if err != nil {
			return nil, false, err
		}
		times = timesOf(run)
	}
	return times, true, nil
}

// timesOf is what History orders by for each module run compiled or found
// in a cache, in microseconds: the compile's CPU time (a backend is
// single-threaded, so it is its wall time on an idle machine, without the
// waits for a busy machine or a fork server's start; a hit records the
// original compile's), else its wall time.
func timesOf(run *Run) map[string]int64 {
	times := map[string]int64{}
	for i := range run.Actions {
		a := &run.Actions[i]
		if _, seen := times[a.Module]; seen {
			continue
		}
		switch {
		case a.CPU > 0 && (a.Compiled() || a.Where == WhereLocalCache || a.Where == WhereRemoteCache):
			times[a.Module] = a.CPU
		case a.Compiled():
			times[a.Module] = a.Duration().Microseconds()
		}
	}
	return times
}

// startLast begins reading the modules' last records, for Explain, in the
// background: the run calls it at its first miss, so that they are read
// while it compiles, and only if some miss will need them.
func (h *History) startLast() {
	if h == nil {
		return
	}
	h.lastOnce.Do(func() {
		h.lastDone = make(chan struct{})
		if h.store == nil {
			close(h.lastDone) // nothing to read: last is what it holds
			return
		}
		go func() {
			defer close(h.lastDone)
			h.loadLast()
		}()
	})
}

// loadLast reads the newest record of each module, within History's
// bounds.
func (h *History) loadLast() {
	h.store.recent(func(path string) (same, done bool) {
		if d, err := recordDir(path); err != nil || d != h.dir {
			return false, false
		}
		run, err := readFile(path)
		if err != nil || run.Dir != h.dir {
			return false, false
		}
		for j := range run.Actions {
			a := &run.Actions[j]
			if _, seen := h.last[a.Module]; h.want[a.Module] && !seen && a.Key != "" {
				h.last[a.Module] = past{run, a}
			}
		}
		return true, len(h.last) == len(h.want)
	})
}

// ReadAhead is the compile times of the newest record of a directory, read
// while the run they help plan is still reading its job file
// (Recorder.ReadAhead).
type ReadAhead struct {
	done  chan struct{}
	path  string // "" if there is none
	times map[string]int64
}

// readAhead begins reading the newest record of dir, as History would
// read it first.
func (s *Store) readAhead(dir string) *ReadAhead {
	ra := &ReadAhead{done: make(chan struct{})}
	go func() {
		defer close(ra.done)
		s.recent(func(path string) (same, done bool) {
			times, ok, err := readTimes(path, dir)
			if ok && err == nil {
				ra.path, ra.times = path, times
			}
			return ok && err == nil, ok && err == nil
		})
	}()
	return ra
}

// Expect returns each action's expected duration from history, so the
// scheduler starts the longest first: a module's last compile time when
// recorded, else its bitcode size (sizes, as the scheduler weighed them)
// times the time per byte of the modules that have one. Without any
// history it returns none (the scheduler then orders by size), and known
// is how many actions had a recorded time.
func (h *History) Expect(actions []*action.Action, sizes map[*action.Action]int64) (expected map[*action.Action]time.Duration, known int) {
	if h == nil || len(h.took) == 0 {
		return nil, 0
	}
	size := func(a *action.Action) int64 { return sizes[a] }
	expected = make(map[*action.Action]time.Duration, len(actions))
	var sumT time.Duration
	var sumB int64
	var unknown []*action.Action
	for _, a := range actions {
		if d, ok := h.took[action.ModuleName(a.ID)]; ok {
			expected[a] = max(d, 1)
			known++
			if b := size(a); b > 0 {
				sumT += d
				sumB += b
			}
			continue
		}
		unknown = append(unknown, a)
	}
	for _, a := range unknown {
		if sumB > 0 {
			expected[a] = max(time.Duration(float64(sumT)/float64(sumB)*float64(size(a))), 1)
		} else {
			expected[a] = 1 // after every module with history, by size
		}
	}
	return expected, known
}

// Explain sets Miss on every action of run that was compiled: why it was
// not a cache hit, by comparing its key's parts with the module's last
// record. h may be nil (no history).
func (h *History) Explain(run *Run) {
	if h != nil && (run.LocalCache || run.Remote != "") {
		for i := range run.Actions {
			if a := &run.Actions[i]; a.Compiled() && a.Key != "" {
				h.startLast()
				<-h.lastDone
				break
			}
		}
	}
	for i := range run.Actions {
		a := &run.Actions[i]
		if a.Compiled() {
			a.Miss = h.why(run, a)
		}
	}
}

func (h *History) why(run *Run, a *Action) []string {
	if !run.LocalCache && run.Remote == "" {
		return []string{"no cache was used (--no-cache)"}
	}
	if a.NotCached != "" {
		return []string{a.NotCached}
	}
	if a.Key == "" {
		return []string{"no cache key could be made for it (see the run's warnings)"}
	}
	if a.CacheError != "" {
		return []string{"the cache's entry for it could not be used: " + a.CacheError}
	}
	var p past
	ok := false
	if h != nil {
		p, ok = h.last[a.Module]
	}
	if !ok {
		return []string{"first compile of this module that is recorded"}
	}
	o := p.act
	if o.Key == a.Key {
		return []string{fmt.Sprintf("the key is the same as in run %s: the entry was evicted, the cache was cleared, "+
			"or the result was not stored", p.run.ID)}
	}
	var why []string
	if o.Compiler != a.Compiler {
		why = append(why, "the compiler changed")
	}
	why = append(why, flagDiff(command(p.run, o), command(run, a))...)
	if !slices.Equal(o.Env, a.Env) {
		why = append(why, fmt.Sprintf("the environment changed: %s (was %s)", orNone(a.Env), orNone(o.Env)))
	}
	if o.Platform != a.Platform {
		why = append(why, fmt.Sprintf("the remote platform changed: %q (was %q)", a.Platform, o.Platform))
	}
	if o.Content != a.Content {
		why = append(why, fmt.Sprintf("the module %s itself changed", a.Module))
	}
	oldImp := map[string]bool{}
	for _, m := range o.Imports {
		oldImp[m] = true
	}
	for _, m := range a.Imports {
		switch {
		case !oldImp[m]:
			why = append(why, "it imports "+m+" now")
		case p.run.Contents[m] != run.Contents[m]:
			why = append(why, "import "+m+" changed")
		}
		delete(oldImp, m)
	}
	for _, m := range sortedKeys(oldImp) {
		why = append(why, "it no longer imports "+m)
	}
	if len(why) == 0 && o.Order != a.Order {
		why = append(why, "the order in which it imports from its modules changed: their paths sort differently")
	}
	if len(why) == 0 && o.Index != a.Index {
		why = append(why, "its index changed: the thin link decided differently what to import or inline "+
			"(a module it does not import changed, or a symbol's visibility)")
	}
	if len(why) == 0 {
		why = append(why, "the key changed in a part the record does not keep")
	}
	return why
}

func command(run *Run, a *Action) []string {
	if a.Command >= 0 && a.Command < len(run.Commands) {
		return run.Commands[a.Command]
	}
	return nil
}

// flagDiff says how the command's flags changed.
func flagDiff(old, cur []string) []string {
	if slices.Equal(old, cur) {
		return nil
	}
	count := map[string]int{}
	for _, f := range old {
		count[f]++
	}
	var added, removed []string
	for _, f := range cur {
		if count[f] > 0 {
			count[f]--
		} else {
			added = append(added, f)
		}
	}
	for _, f := range old {
		if count[f] > 0 {
			count[f]--
			removed = append(removed, f)
		}
	}
	switch {
	case len(added) == 0 && len(removed) == 0:
		return []string{"the flags' order changed"}
	case len(added) == 1 && len(removed) == 1:
		return []string{fmt.Sprintf("flag %s instead of %s", added[0], removed[0])}
	}
	var out []string
	if len(added) > 0 {
		out = append(out, "flags added: "+strings.Join(added, " "))
	}
	if len(removed) > 0 {
		out = append(out, "flags removed: "+strings.Join(removed, " "))
	}
	return out
}

func orNone(env []string) string {
	if len(env) == 0 {
		return "none"
	}
	return strings.Join(env, " ")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

// sortActions orders a run's actions by when they started.
func sortActions(as []Action) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].Queued < as[j].Queued })
}
