// Step 2: the thin link (lld --thinlto-index-only) and what it tells
// thindist: the modules the link uses, their shards, what it extracted.

package thinlink

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// setPrefixes chooses the directories lld writes shards into and names
// native objects under: nested deep enough that a module path climbing with
// ".." stays inside the work directory.
func (p *plan) setPrefixes() {
	keys := make([]string, len(p.order))
	for i, m := range p.order {
		keys[i] = m.Key
	}
	nest := nesting(keys)
	p.idx = filepath.Join(p.work, "idx") + nest + "/"
	p.native = filepath.Join(p.work, "lld-native") + nest + "/"
}

// nesting is what to append to a directory ("/u/u") so that each of names,
// appended to it in turn, stays inside it however far it climbs with "..".
// An absolute name is appended as it is ("dir//abs/x.o") and may climb too.
func nesting(names []string) string {
	depth := 0
	for _, n := range names {
		depth = max(depth, action.UpLevels(strings.TrimLeft(filepath.ToSlash(n), "/")))
	}
	return strings.Repeat("/u", depth)
}

// linkArgs is the link command as lld gets it for the thin link (and, in
// one process, for the whole link): every archive holding bitcode replaced
// by its members between --start-lib and --end-lib, every bitcode module
// under its file's name (Module.Key).
func (p *plan) linkArgs() []string {
	return p.render(func(i int, it item) ([]string, bool) {
		if m, ok := p.single[i]; ok {
			return []string{m.Key}, true
		}
		if ents, ok := p.archive[i]; ok {
			var files []string
			for _, e := range ents {
				if e.mod != nil {
					files = append(files, e.mod.Key)
				} else {
					files = append(files, e.file)
				}
			}
			return group(it, nil, files), true
		}
		return nil, false
	})
}

// thinLink runs the thin link and returns the modules lld lists, in link order.
func (p *plan) thinLink(ctx context.Context) ([]*Module, []string, error) {
	p.setPrefixes()
	idx, native := p.idx, p.native
	indexFile := filepath.Join(p.work, "index.txt")
	args := p.linkArgs()
	whyFile := filepath.Join(p.work, "why-extract.txt")
	// No --thinlto-emit-imports-files: each module's imports are read from
	// its shard (see imports), which spares creating one file per module
	// (see docs/design.md, "Thin link without import files").
	for _, f := range []string{"--why-extract=" + whyFile, "--thinlto-index-only=" + indexFile,
		"--thinlto-prefix-replace=;" + idx + ";" + native} {
		args = append(args, p.line.wrap(f)...)
	}
	rsp := filepath.Join(p.work, "thin-link.rsp")
	if err := writeResponseFile(p.abs(rsp), args); err != nil {
		return nil, nil, &Error{Step: "writing the thin link's response file", Err: err}
	}
	cmd := []string{p.line.compiler, "@" + rsp}
	const step = "the thin link (step 1 of 3: lld --thinlto-index-only computes imports and index shards)"
	out, err := p.run(ctx, cmd, nil)
	out = p.readable(out)
	if err != nil {
		return nil, cmd, &Error{Step: step, Err: fmt.Errorf("%w%s\n  command: %s", err, hint(out), action.ShellQuote(cmd)), Output: out}
	}
	if p.opts.Verbose && out != "" {
		io.WriteString(p.opts.Stderr, out)
	}
	data, err := os.ReadFile(p.abs(indexFile))
	if err != nil {
		return nil, cmd, &Error{Step: step, Err: fmt.Errorf("the linker exited 0 but wrote no index file %s: %v", indexFile, err), Output: out}
	}
	if err := p.readWhyExtract(whyFile); err != nil {
		return nil, cmd, &Error{Step: step, Err: err, Output: out}
	}
	var linked []*Module
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			continue
		}
		key, ok := strings.CutPrefix(l, native)
		m := p.modules[key]
		if !ok || m == nil {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"lld listed the native object %q, which is not a module thindist put on the link line under that path. "+
					"The backend must be given exactly the path lld recorded, or it writes an object with no symbols; "+
					"bitcode reached through a linker script, a -l library outside the command's -L directories, or "+
					"-Wl,@file is not supported: pass it to the link by path", l)}
		}
		if m.linked {
			continue
		}
		m.linked = true
		linked = append(linked, m)
	}
	// Every module the link uses needs an index shard named after exactly
	// the path lld recorded: a shard under another name means lld recorded
	// another spelling, and the backend would silently compile nothing.
	for _, m := range linked {
		shard := p.shard(m)
		if _, err := os.Stat(p.abs(shard)); err != nil {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"module %s: lld wrote no index shard %s: the path it recorded differs from %q", m.Display, shard, m.Key)}
		}
	}
	// A non-lazy module the link does not list would vanish from the program.
	for i, m := range p.single {
		if !m.linked && !p.line.items[i].lazy {
			return nil, cmd, &Error{Step: step, Err: fmt.Errorf(
				"lld listed no native object for %s, although it is not in a library; is it full-LTO bitcode "+
					"(-flto rather than -flto=thin)? thindist link handles ThinLTO modules only", m.Display)}
		}
	}
	return linked, cmd, nil
}

// readWhyExtract records what the thin link extracted from archives and
// --start-lib groups (lld's --why-extract, written in index-only mode by lld
// 19 and 22 alike): the final link must link exactly those, even when the
// optimised code no longer refers to them (a member kept for its static
// constructor), as in-process ThinLTO does.
func (p *plan) readWhyExtract(path string) error {
	lines, err := readLines(p.abs(path))
	if err != nil {
		return fmt.Errorf("the linker wrote no --why-extract file: %v", err)
	}
	p.extracted = map[string]bool{}
	p.members = map[string][]string{}
	p.forced = map[string]bool{}
	p.extractOrder = map[string]int{}
	for _, l := range lines[min(1, len(lines)):] { // a header line first
		f := strings.Split(l, "\t")
		if len(f) < 2 {
			continue
		}
		if !p.extracted[f[1]] {
			p.extractOrder[f[1]] = len(p.extractOrder)
		}
		p.extracted[f[1]] = true
		if p.modules[f[1]] != nil {
			continue // a module's file, named as a member would be (names.go)
		}
		if i := strings.LastIndex(f[1], "("); i > 0 && strings.HasSuffix(f[1], ")") {
			a := f[1][:i]
			p.members[a] = append(p.members[a], f[1][i+1:len(f[1])-1])
		}
	}
	return nil
}

// shard names the index shard lld wrote for m: the module path appended to
// the index prefix (lld resolves ".." in it, as Join does).
func (p *plan) shard(m *Module) string { return filepath.Join(p.idx, m.Key) + ".thinlto.bc" }

// hint explains a thin-link failure caused by an lld that lacks an option
// of the separate thin-link flow: it names the options lld rejected.
func hint(out string) string {
	var missing []string
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, "unknown argument '")
		if !ok {
			continue
		}
		arg, _, _ := strings.Cut(rest, "'")
		for _, f := range []string{"--thinlto-index-only", "--thinlto-prefix-replace", "--why-extract"} {
			if arg == f || strings.HasPrefix(arg, f+"=") {
				missing = append(missing, f)
			}
		}
	}
	if strings.Contains(out, "--thinlto-prefix-replace") && strings.Contains(out, "expects") {
		missing = append(missing, "--thinlto-prefix-replace=old;new;native (the three-part form)")
	}
	if len(missing) == 0 {
		return ""
	}
	sort.Strings(missing)
	return fmt.Sprintf("\n  your lld does not support %s, which thindist link needs for the separate thin link; "+
		"use a newer lld (LLVM 19 and 22 are known to work) with -fuse-ld=lld or --ld-path=",
		strings.Join(missing, ", "))
}
