package reapi

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/bitcode"
	"github.com/thindist/thindist/internal/digest"
)

// RelocatedDir holds, relative to the working directory, the inputs that
// the link names by absolute paths (objects of other trees, archive members
// that lld copies out beside an absolute -o). An absolute path exists only
// on this machine, so such an input is placed under a relative name and the
// index shard is rewritten to match (relocation).
const RelocatedDir = StableDir + "/abs"

// relocation maps the inputs of an action named by absolute paths to
// relative names inside the input root.
type relocation struct {
	a *action.Action
	// byPath maps each relocated input's path, as spelled and cleaned
	// absolute, to its new name.
	byPath map[string]string
	taken  map[string]string // new name -> local file, to keep names apart
}

func newRelocation(a *action.Action) *relocation {
	return &relocation{a: a, byPath: map[string]string{}, taken: map[string]string{}}
}

// name returns input in's relative name: RelocatedDir/<content digest>
// with the original extension (clang picks the input type by it), so the
// name, and the executable action, repeat wherever the file lives. Two
// files of the same content under different paths get different names:
// the shard tells its modules apart by path.
func (r *relocation) name(in action.Input, d digest.Digest) string {
	local := r.a.Abs(in.Local())
	base := RelocatedDir + "/" + d.HexHash()[:32]
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
