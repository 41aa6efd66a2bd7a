// Package recordview shows a recorded run (a record of package record, as
// `thindist report` reads it): a summary for the terminal and a
// self-contained HTML page (timeline, phases, critical path, a table of the
// modules with the reasons they missed the cache).
package recordview

import (
	"sort"

	"github.com/thindist/thindist/internal/observe/record"
)

// Lane is one row of the timeline: a local process slot, or an action in
// flight with the remote service.
type Lane struct {
	Remote  bool
	Actions []int // indices into Run.Actions, in time order
}

// remote reports whether the action's lane is a remote one.
func remote(a *record.Action) bool {
	return a.Where == record.WhereRemote || a.Where == record.WhereRemoteCache
}

// Lanes lays the actions out on as few lanes as hold them without overlap,
// local and remote apart: as many local lanes as processes ran at once (at
// most --jobs), as many remote ones as actions were in flight remotely.
func Lanes(run *record.Run) []Lane {
	idx := make([]int, len(run.Actions))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return run.Actions[idx[i]].Begin < run.Actions[idx[j]].Begin })
	var local, rem []Lane
	var localEnd, remEnd []int64
	place := func(lanes *[]Lane, ends *[]int64, i int, isRemote bool) {
		a := &run.Actions[i]
		for k := range *lanes {
			if (*ends)[k] <= a.Begin {
				(*lanes)[k].Actions = append((*lanes)[k].Actions, i)
				(*ends)[k] = a.End
				return
			}
		}
		*lanes = append(*lanes, Lane{Remote: isRemote, Actions: []int{i}})
		*ends = append(*ends, a.End)
	}
	for _, i := range idx {
		if remote(&run.Actions[i]) {
			place(&rem, &remEnd, i, true)
		} else {
			place(&local, &localEnd, i, false)
		}
	}
	return append(local, rem...)
}

// CriticalPath returns the actions that decided when the backends ended:
// the one that ended last and, before it, those that ran back to back on
// its lane (each started when the previous ended, within slack), as
// indices into Run.Actions, earliest first.
func CriticalPath(run *record.Run, lanes []Lane) []int {
	last, lane := -1, -1
	for l, ln := range lanes {
		for _, i := range ln.Actions {
			if last < 0 || run.Actions[i].End > run.Actions[last].End {
				last, lane = i, l
			}
		}
	}
	if last < 0 {
		return nil
	}
	// A slot picks its next action within a few milliseconds of the last
	// one ending; a longer gap means the lane was idle.
	const slack = 20_000 // µs
	acts := lanes[lane].Actions
	k := len(acts) - 1
	for acts[k] != last {
		k--
	}
	path := []int{last}
	for ; k > 0; k-- {
		prev, cur := &run.Actions[acts[k-1]], &run.Actions[acts[k]]
		if cur.Begin-prev.End > slack {
			break
		}
		path = append(path, acts[k-1])
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}
