package record

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/action"
)

// History is what earlier runs in the same directory recorded of the
// modules of this one: the last record of each (to explain a miss) and its
// last compile time (to order the work).
type History struct {
	last map[string]past // module -> its newest record
	took map[string]time.Duration
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

// History reads the records of runs in dir, newest first, until every
// module is found, or it has read historyRuns of that directory's records
// or historyReads records in all (a module new to the link must not make
// every link read every record). A record that cannot be read is skipped:
// history only ever improves a run.
func (s *Store) History(dir string, modules []string) *History {
	h := &History{last: map[string]past{}, took: map[string]time.Duration{}}
	want := map[string]bool{}
	for _, m := range modules {
		want[m] = true
	}
	es, _ := s.List()
	same := 0
	for i := len(es) - 1; i >= 0 && i >= len(es)-historyReads && same < historyRuns &&
		(len(h.last) < len(want) || len(h.took) < len(want)); i-- {
		// Records of other directories are skipped by their header alone:
		// a record of a 5,000-module link is megabytes of JSON.
		if d, err := recordDir(es[i].Path); err != nil || d != dir {
			continue
		}
		run, err := ReadFile(es[i].Path)
		if err != nil || run.Dir != dir {
			continue
		}
		same++
		for j := range run.Actions {
			a := &run.Actions[j]
			if !want[a.Module] {
				continue
			}
			if _, ok := h.last[a.Module]; !ok && a.Key != "" {
				h.last[a.Module] = past{run, a}
			}
			if _, ok := h.took[a.Module]; !ok {
				switch {
				// The compile's CPU time: a backend is single-threaded, so
				// it is its wall time on an idle machine, without the
				// waits for a busy machine or a fork server's start. A
				// hit records the original compile's.
				case a.CPU > 0 && (a.Compiled() || a.Where == WhereLocalCache || a.Where == WhereRemoteCache):
					h.took[a.Module] = time.Duration(a.CPU) * time.Microsecond
				case a.Compiled():
					h.took[a.Module] = a.Duration()
				}
			}
		}
	}
	return h
}

// Expect sets each action's Expected duration from history, so the
// scheduler starts the longest first: a module's last compile time when
// recorded, else its bitcode size times the time per byte of the modules
// that have one. Without any history it leaves them unset (the scheduler
// then orders by size). It returns how many actions had a recorded time.
func (h *History) Expect(actions []*action.Action) int {
	if h == nil || len(h.took) == 0 {
		return 0
	}
	size := func(a *action.Action) int64 {
		for _, in := range a.Inputs {
			if in.Role == action.RoleModule {
				if fi, err := os.Stat(a.Abs(in.Local())); err == nil {
					return fi.Size()
				}
			}
		}
		return 0
	}
	var known int
	var sumT time.Duration
	var sumB int64
	var unknown []*action.Action
	for _, a := range actions {
		if d, ok := h.took[action.ModuleName(a.ID)]; ok {
			a.Expected = max(d, 1)
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
			a.Expected = max(time.Duration(float64(sumT)/float64(sumB)*float64(size(a))), 1)
		} else {
			a.Expected = 1 // after every module with history, by size
		}
	}
	return known
}

// Explain sets Miss on every action of run that was compiled: why it was
// not a cache hit, by comparing its key's parts with the module's last
// record. h may be nil (no history).
func (h *History) Explain(run *Run) {
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
	if a.Key == "" {
		return []string{"no cache key could be made for it (see the run's warnings)"}
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
