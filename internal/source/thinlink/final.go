// Step 4: the final link, with native objects in place of the bitcode.

package thinlink

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/thindist/thindist/internal/action"
)

// finalLink runs the link with native objects in place of the bitcode,
// laid out as lld's in-process LTO lays out its link: every input that is
// not bitcode keeps its place on the command line (members the thin link
// extracted from a library in the order it extracted them), and the native
// objects, in the order of lld's index (the modules' link order), come
// after all of them, as lld appends the objects its LTO produced to the
// files it already has. The order of input sections in the output, and so
// the section layout and the entry point, are then those of the in-process
// link (for the kernel: head_64.o's startup_64 stays first in .head.text).
// Through the clang driver, the driver's own trailing libraries and crt
// objects still come after the native objects.
func (p *plan) finalLink(ctx context.Context, linked []*Module) ([]string, error) {
	var forceErr error
	// A file linked as a plain object must appear once, although an archive
	// (a thin one: the same member files) may be given twice.
	seen := map[string]bool{}
	once := func(files []string) []string {
		var out []string
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		return out
	}
	args := p.render(func(i int, it item) ([]string, bool) {
		if _, ok := p.single[i]; ok {
			return []string{}, true // its native object comes at the end
		}
		if ents, ok := p.archive[i]; ok {
			var plain, lazy []string
			for _, e := range ents {
				switch {
				case e.mod != nil: // its native object comes at the end
				case p.extracted[e.file]:
					plain = append(plain, e.file)
				default:
					lazy = append(lazy, e.file)
				}
			}
			if !it.whole {
				sort.SliceStable(plain, func(a, b int) bool { return p.extractOrder[plain[a]] < p.extractOrder[plain[b]] })
			}
			return group(it, once(plain), lazy), true
		}
		if spelled, ok := p.passed[i]; ok {
			forced, err := p.forcedMembers(i, spelled)
			if err != nil {
				forceErr = err
			}
			if forced = once(forced); len(forced) > 0 {
				self := it.path
				if it.kind == itLib {
					self = "-l" + it.lib
				}
				return append(group(it, forced, nil), self), true
			}
			return nil, false
		}
		if it.kind == itInput && it.lazy && p.extracted[it.path] {
			return group(it, once([]string{it.path}), nil), true
		}
		return nil, false
	})
	if forceErr != nil {
		return nil, &Error{Step: "extracting archive members for the final link", Err: forceErr}
	}
	var natives []string
	for _, m := range linked {
		natives = append(natives, m.Native)
	}
	natives = once(natives)
	// Plain objects, whatever --start-lib or --start-group the command
	// leaves open at its end.
	if p.line.endLazy {
		natives = append(append([]string{"--end-lib"}, natives...), "--start-lib")
	}
	if p.line.endGroup {
		natives = append(append([]string{"--end-group"}, natives...), "--start-group")
	}
	for _, f := range natives {
		args = append(args, p.line.wrap(f)...)
	}
	rsp := filepath.Join(p.work, "final-link.rsp")
	if err := writeResponseFile(p.abs(rsp), args); err != nil {
		return nil, &Error{Step: "writing the final link's response file", Err: err}
	}
	cmd := []string{p.line.compiler, "@" + rsp}
	out, err := p.run(ctx, cmd, p.opts.Stdout)
	if err != nil {
		// lld's --thinlto-index-only stops before it checks for undefined
		// symbols, so those are reported here, as an in-process link
		// reports them after its backends.
		return cmd, &Error{Step: "the final link (step 3 of 3: linking the native objects)",
			Err: fmt.Errorf("%w\n  command: %s", err, action.ShellQuote(cmd)), Output: out}
	}
	io.WriteString(p.opts.Stderr, out) // the linker's warnings
	return cmd, nil
}

// forcedMembers returns the members of an archive without bitcode that the
// thin link extracted, as files (written out for a regular archive), so the
// final link links them whatever the optimised code still refers to. The
// archive stays on the link line for what the native code newly needs
// (runtime library calls), as after an in-process LTO.
func (p *plan) forcedMembers(i int, spelled string) ([]string, error) {
	var names []string
	for a, ms := range p.members {
		// lld spells the archive as it opened it (a -l search builds
		// "dir/libx.a"): compare files, not strings. An archive given twice
		// has its members forced once.
		if !p.forced[a] && sameFile(p.abs(a), p.abs(spelled)) {
			p.forced[a] = true
			names = append(names, ms...)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	ar, err := readArchive(p.abs(spelled))
	if err != nil {
		return nil, err
	}
	var files []string
	for _, name := range names {
		// lld names a thin archive's member by the path the archive
		// records ("../obj/x.o"), a regular archive's by its base name.
		var found []Member
		for _, m := range ar.Members {
			if m.Name == name {
				found = append(found, m)
			}
		}
		if len(found) == 0 {
			for _, m := range ar.Members {
				if filepath.Base(m.Name) == name {
					found = append(found, m)
				}
			}
		}
		if len(found) != 1 {
			fmt.Fprintf(p.opts.Stderr, "thindist: warning: %s has %d members named %s; leaving it to archive semantics\n", spelled, len(found), name)
			continue
		}
		if ar.Thin {
			files = append(files, filepath.Join(filepath.Dir(spelled), found[0].Name))
			continue
		}
		file := filepath.Join(p.work, "forced", fmt.Sprint(i), name)
		if err := os.MkdirAll(filepath.Dir(p.abs(file)), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.abs(file), found[0].Data, 0o644); err != nil {
			return nil, err
		}
		p.stands(file, spelled)
		files = append(files, file)
	}
	return files, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
