// Module names: the path each bitcode module is given to lld under, which
// sorts as the name lld gives it in an in-process link.

package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A backend imports from its sources in the byte order of their module
// names, and that order shows in its object (the order of the declarations
// it imports, so of symbols and sections). In-process, lld names a plain
// object by its path as the command spells it and an archive member
// "lib.a(m.o at 88)": the archive as lld opened it, the member's file name
// and the offset of its header. thindist gives lld every module as a file of
// its own, so it names each one <modDir>/<lld's name> (a member's with
// ".o" appended, see memberName): a file there (a
// symbolic link to the module, or a regular archive's member written out)
// that the thin link, the index shards and the backends all name. Every
// name shares the prefix, so any two sort as lld's names for them do, and
// every backend imports in the order it would in-process: the objects are
// the in-process link's, byte for byte.
//
// The names carry no machine-specific path (the prefix is the work
// directory, relative when it can be), and the cache key does not depend on
// them but through that order (reapi.Keyer), so an edit that moves an
// archive's members to other offsets changes no key.

// setModuleDir chooses p.modDir: <work>/m, nested deep enough that every
// name climbing with ".." stays inside it.
func (p *plan) setModuleDir() {
	// A member's name climbs as far as its archive's path does.
	paths := make([]string, len(p.bitcode))
	for i, in := range p.bitcode {
		paths[i] = in.path
	}
	p.modDir = filepath.ToSlash(filepath.Join(p.work, "m")) + nesting(paths)
	p.placed, p.made = map[string]string{}, map[string]bool{}
}

// memberName is lld's name for the archive member whose header is at off
// in the archive it opened as archive, "archive(base at off)", with ".o"
// appended: clang then types the file as an object, as it does lld's own
// copies of members ("lib.a(m.o at 88).1.2F.o"), so the backend command's
// "-x ir" stays out of the cache key (reapi's keyed) and DTLTO and
// `thindist link` share entries. No other name begins with a member's
// whole name, so the suffix changes no order.
func memberName(archive, member string, off int64) string {
	return archive + "(" + filepath.Base(member) + " at " + strconv.FormatInt(off, 10) + ").o"
}

// place puts a module under the name name (see above) and returns the path
// to give lld for it. origin identifies the module's content (a file, or an
// archive and an offset): a file already placed for the same origin is
// reused (an archive given twice; "a.o" and "./a.o"); one placed for
// another, which only two spellings that meet under modDir can cause
// ("/abs/a.o" and a relative "abs/a.o"; "x/../a.o" and "a.o" through a
// symbolic link x), gets a suffix "~N", which sorts next to it. put
// creates the file at disk.
func (p *plan) place(name, origin string, put func(disk string) error) (string, error) {
	key := p.modDir + "/" + name
	placed := false
	for n := 2; ; n++ {
		prev, taken := p.placed[filepath.Clean(p.abs(key))]
		if !taken || prev == origin {
			placed = taken
			break
		}
		key = p.modDir + "/" + name + "~" + strconv.Itoa(n)
	}
	// Every directory the name walks through must exist, those it leaves
	// again with ".." too ("sub/../x.o").
	for i := strings.IndexByte(key, '/'); i >= 0; i = next(key, i) {
		dir := key[:i]
		switch filepath.Base(dir) {
		case "..", ".", "/":
			continue
		}
		if !p.made[dir] {
			if err := os.MkdirAll(p.abs(dir), 0o755); err != nil {
				return "", err
			}
			p.made[dir] = true
		}
	}
	if placed {
		return key, nil
	}
	disk := filepath.Clean(p.abs(key))
	if err := put(disk); err != nil {
		return "", fmt.Errorf("naming module %s: %w", name, err)
	}
	p.placed[disk] = origin
	return key, nil
}

// next is the index of the next '/' in s after i, or -1.
func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// link places the module in the file at path (relative to the link's
// directory, or absolute), under name, as a symbolic link to it.
func (p *plan) link(name, path string) (string, error) {
	target := filepath.Clean(p.abs(path))
	return p.place(name, target, func(disk string) error { return os.Symlink(target, disk) })
}

// readable takes the prefix off the module names in the linker's messages
// ("<modDir>/obj/a.o" becomes "obj/a.o").
func (p *plan) readable(out string) string {
	if p.modDir == "" || out == "" {
		return out
	}
	return strings.ReplaceAll(out, p.modDir+"/", "")
}
