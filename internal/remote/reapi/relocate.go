package reapi

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/digest"
)

// RelocatedDir holds, relative to the working directory, the inputs that
// the link names by absolute paths (objects of other trees, archive members
// that lld copies out beside an absolute -o). An absolute path exists only
// on this machine, so such an input is placed under a relative name and the
// index shard is rewritten to match (relocation).
const RelocatedDir = StableDir + "/abs"

// relocation maps the inputs of an action named by absolute paths to
// relative names inside the input root.
//
// The backend imports from its modules in the byte order of the paths its
// shard gives them, and that order shows in the object; the cache key
// holds it (addImportOrder). So when a module or an import is relocated,
// every module and import of the action is, each named by its rank in
// that order: the worker imports in the order this machine would, and its
// object is the one the key stands for.
type relocation struct {
	a *action.Action
	// byPath maps each relocated input's path, as spelled and cleaned
	// absolute, to its new name.
	byPath map[string]string
	taken  map[string]string // new name -> local file, to keep names apart
	// ranks maps the path (as spelled and absolute) of every module of the
	// shard's table to its rank in their byte order, zero-padded; nil when
	// no module or import is relocated.
	ranks map[string]string
}

func newRelocation(a *action.Action) *relocation {
	return &relocation{a: a, byPath: map[string]string{}, taken: map[string]string{}}
}

// rankModules sets r.ranks from shard's module table when one of the
// action's modules or imports is named by an absolute path.
func (r *relocation) rankModules(shard []byte) error {
	moves := false
	for _, in := range r.a.Inputs {
		moves = moves || isModule(in) && filepath.IsAbs(in.Path)
	}
	if !moves || shard == nil {
		return nil
	}
	table, err := bitcode.ModuleTable(shard)
	if err != nil {
		return fmt.Errorf("index shard: %w", err)
	}
	paths := make([]string, len(table))
	for i, m := range table {
		paths[i] = m.Path
	}
	slices.Sort(paths)
	width := len(strconv.Itoa(len(paths) - 1))
	r.ranks = map[string]string{}
	for i, p := range paths {
		rank := fmt.Sprintf("%0*d", width, i)
		r.ranks[p] = rank
		r.ranks[r.a.Abs(p)] = rank
	}
	return nil
}

func isModule(in action.Input) bool {
	return in.Role == action.RoleModule || in.Role == action.RoleImport
}

// ranked returns in's rank among the relocated modules: ok is false
// unless in is a module or an import and every module is relocated (see
// relocation).
func (r *relocation) ranked(in action.Input) (rank string, ok bool) {
	if r.ranks == nil || !isModule(in) {
		return "", false
	}
	if rank, ok = r.ranks[in.Path]; !ok {
		rank, ok = r.ranks[r.a.Abs(in.Path)]
	}
	return rank, ok
}

// name returns input in's relative name, with the original extension
// (clang picks the input type by it): RelocatedDir/<rank> for a ranked
// module (see relocation), else RelocatedDir/<content digest>. Either
// repeats wherever the files live, and so does the executable action. Two
// files of the same content under different paths get different names:
// the shard tells its modules apart by path.
func (r *relocation) name(in action.Input, d digest.Digest) string {
	local := r.a.Abs(in.Local())
	base := RelocatedDir + "/" + d.HexHash()[:32]
	if rank, ok := r.ranked(in); ok {
		base = RelocatedDir + "/" + rank
	}
	name := base + filepath.Ext(in.Path)
	for k := 2; r.taken[name] != "" && r.taken[name] != local; k++ {
		name = base + "-" + strconv.Itoa(k) + filepath.Ext(in.Path)
	}
	r.taken[name] = local
	r.byPath[in.Path] = name
	r.byPath[r.a.Abs(in.Path)] = name
	return name
}

// shard returns the index shard data rewritten so that its module table
// names every relocated module by its new name, or nil when no entry
// changes. An absolute entry that names no input of the action (the
// backend cannot need it: lld lists every import) is renamed to a path
// that is absent from the input root, so the worker never reads a file of
// its own machine that happens to lie at that path.
func (r *relocation) shard(data []byte) ([]byte, error) {
	if len(r.byPath) == 0 {
		return nil, nil
	}
	changed := false
	out, err := bitcode.RewriteModulePaths(data, func(m bitcode.Module) string {
		n, ok := r.byPath[m.Path]
		if !ok {
			n, ok = r.byPath[r.a.Abs(m.Path)]
		}
		switch {
		case ok:
		case filepath.IsAbs(m.Path):
			n = fmt.Sprintf("%s/unlisted/%d", RelocatedDir, m.ID)
		default:
			n = m.Path
		}
		changed = changed || n != m.Path
		return n
	})
	if err != nil || !changed {
		return nil, err
	}
	return out, nil
}
