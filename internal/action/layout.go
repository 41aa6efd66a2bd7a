package action

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Layout places an action's inputs in a private directory tree (an input
// root): every input at the relative path the command and the index shards
// spell, under a working directory nested deep enough that paths starting
// with ".." stay inside the root. A local sandbox and a remote input root are
// both built from it, so the same action runs the same way in either.
type Layout struct {
	// WorkDir is the working directory inside the root, slash-separated;
	// "" is the root itself.
	WorkDir string
	// Files maps each root-relative path (slash-separated) to the input that
	// must appear there.
	Files []LayoutFile
	// Dirs lists root-relative directories that must exist even though no
	// file is placed in them, so that a path like "a/../b.o" resolves.
	Dirs []string
}

// LayoutFile is one input placed in the root.
type LayoutFile struct {
	RootPath string
	Input    int // index into Action.Inputs
}

// workDirName is the directory component used to nest the working directory.
// It is fixed, so the layout, and every digest computed from it, repeats
// across links, machines and checkouts.
const workDirName = "w"

// ErrAbsolute is returned by Layout for an input named by an absolute path:
// such an action only runs where that path exists.
type ErrAbsolute struct{ Path string }

func (e *ErrAbsolute) Error() string {
	return fmt.Sprintf("input %q is named by an absolute path, which only exists on this machine", e.Path)
}

// Layout computes the input root for the action. Inputs named by an absolute
// path cannot be placed in a root and yield *ErrAbsolute: a caller that
// builds a root for another machine gives them relative names first, and
// makes the index shard name them so too (reapi.BuildExecutable).
func (a *Action) Layout() (*Layout, error) { return a.layout(false) }

// LocalLayout is Layout for a root on this machine: an input named by an
// absolute path already resolves where the command looks for it, so it is
// left out of the root unless its content lives elsewhere (then it cannot
// be placed, and *ErrAbsolute is returned).
func (a *Action) LocalLayout() (*Layout, error) { return a.layout(true) }

func (a *Action) layout(skipAbsolute bool) (*Layout, error) {
	depth := 0
	for _, in := range a.Inputs {
		if filepath.IsAbs(in.Path) {
			if skipAbsolute && (in.Source == "" || in.Source == in.Path) {
				continue
			}
			return nil, &ErrAbsolute{Path: in.Path}
		}
		if d := UpLevels(in.Path); d > depth {
			depth = d
		}
	}
	l := &Layout{}
	var wd []string
	for i := 0; i < depth; i++ {
		wd = append(wd, workDirName)
	}
	l.WorkDir = strings.Join(wd, "/")

	seen := map[string]int{}
	dirs := map[string]bool{}
	for i, in := range a.Inputs {
		if filepath.IsAbs(in.Path) {
			continue // skipAbsolute: checked above
		}
		p := filepath.ToSlash(in.Path)
		rp := path.Join(l.WorkDir, p)
		if prev, ok := seen[rp]; ok {
			if a.Inputs[prev].Local() != in.Local() {
				return nil, fmt.Errorf("inputs %q and %q of %s land on the same path %q", a.Inputs[prev].Path, in.Path, a.ID, rp)
			}
			continue
		}
		seen[rp] = i
		l.Files = append(l.Files, LayoutFile{RootPath: rp, Input: i})
		// Every directory the raw spelling walks through must exist, even
		// those it leaves again with "..".
		cur := l.WorkDir
		parts := strings.Split(p, "/")
		for _, c := range parts[:len(parts)-1] {
			cur = path.Join(cur, c)
			if c != ".." && c != "." && c != "" {
				dirs[cur] = true
			}
		}
	}
	for d := range dirs {
		l.Dirs = append(l.Dirs, d)
	}
	sort.Strings(l.Dirs)
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].RootPath < l.Files[j].RootPath })
	return l, nil
}

// UpLevels returns how far above its start a relative path climbs at most
// ("../x/../../y" climbs 2); an absolute path climbs 0.
func UpLevels(p string) int {
	if filepath.IsAbs(p) {
		return 0
	}
	depth, max := 0, 0
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if -depth > max {
				max = -depth
			}
		default:
			depth++
		}
	}
	return max
}
