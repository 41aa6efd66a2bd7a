// Step 1: classify the link's inputs by content and give every bitcode
// module a file of its own, named as lld names it in-process (names.go).

package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// entry is one file of a replaced archive: a module, or a file passed as is.
type entry struct {
	mod  *Module
	file string
}

// bitcodeInput is an input of the link that holds bitcode.
type bitcodeInput struct {
	item int      // its index among the link's items
	path string   // as spelled
	ar   *Archive // nil for a bitcode object
}

// findInputs classifies every input of the link by content, writing
// nothing: a link without bitcode runs unchanged and leaves no trace.
func (p *plan) findInputs() {
	for i, it := range p.line.items {
		var path string
		switch it.kind {
		case itInput:
			path = it.path
		case itLib:
			path = it.path // "" when not found in a -L directory: left to the linker
		}
		if path == "" {
			continue
		}
		switch classify(p.abs(path)) {
		case KindMissing:
			p.missing = append(p.missing, path)
		case KindBitcode:
			p.bitcode = append(p.bitcode, bitcodeInput{item: i, path: path})
		case KindArchive, KindThin:
			ar, err := readArchive(p.abs(path))
			if err != nil {
				// Left to the linker: should it hold bitcode, lld records its
				// members under names thindist does not know, which the thin
				// link step reports.
				fmt.Fprintf(p.opts.Stderr, "thindist: warning: cannot read the archive %s (%v); passing it to the linker as it is\n", path, err)
				continue
			}
			if !ar.HasBitcode() {
				p.passed[i] = path
				continue
			}
			p.bitcode = append(p.bitcode, bitcodeInput{item: i, path: path, ar: ar})
		}
	}
}

// addModules names every bitcode module of the link (names.go), in
// command-line order, writing the members of regular archives into the work
// directory.
func (p *plan) addModules() error {
	p.setModuleDir()
	nar := 0
	for _, in := range p.bitcode {
		if in.ar == nil {
			key, err := p.link(in.path, in.path)
			if err != nil {
				return err
			}
			p.single[in.item] = p.addModule(key, in.path, mangle(in.path), p.abs(in.path), "", in.path)
			continue
		}
		ents, err := p.unpack(in.ar, in.path, nar)
		if err != nil {
			return fmt.Errorf("unpacking %s: %w", in.path, err)
		}
		nar++
		p.archive[in.item] = ents
	}
	return nil
}

func (p *plan) addModule(key, display, keep, object, member, input string) *Module {
	if m, ok := p.modules[key]; ok {
		return m // the same file given twice: lld sees it twice too
	}
	if _, ok := p.ids[keep]; ok {
		for j := 2; ; j++ {
			k := fmt.Sprintf("%s.%d", keep, j)
			if _, ok := p.ids[k]; !ok {
				keep = k
				break
			}
		}
	}
	p.ids[keep] = key
	m := &Module{Key: key, Display: display, KeepName: keep, Object: object, Member: member, input: input}
	p.modules[key] = m
	p.order = append(p.order, m)
	return m
}

// unpack lists the files an archive stands for: its bitcode members as
// modules (names.go), its other members as files: a thin archive's own, a
// regular archive's written to <work>/ar/<n>/.
func (p *plan) unpack(ar *Archive, spelled string, n int) ([]entry, error) {
	var ents []entry
	dir := filepath.Join(p.work, "ar", fmt.Sprint(n))
	used := map[string]bool{}
	for _, m := range ar.Members {
		if ar.Thin {
			file := filepath.Join(filepath.Dir(spelled), m.Name)
			if filepath.IsAbs(m.Name) {
				file = m.Name
			}
			if !m.Bitcode {
				ents = append(ents, entry{file: file})
				continue
			}
			key, err := p.link(memberName(spelled, m.Name, m.Offset), file)
			if err != nil {
				return nil, err
			}
			ents = append(ents, entry{mod: p.addModule(key, fmt.Sprintf("%s(%s)", spelled, m.Name),
				mangle(file), p.abs(file), "", spelled)})
			continue
		}
		name := filepath.Base(m.Name)
		if name == "." || name == ".." || name == "/" || name == "" {
			name = "member"
		}
		for j := 2; used[name]; j++ {
			name = fmt.Sprintf("%d.%s", j, filepath.Base(m.Name))
		}
		used[name] = true
		if m.Bitcode {
			data := m.Data
			key, err := p.place(memberName(spelled, m.Name, m.Offset), fmt.Sprintf("%s\x00%d", p.abs(spelled), m.Offset),
				func(disk string) error { return os.WriteFile(disk, data, 0o644) })
			if err != nil {
				return nil, err
			}
			ents = append(ents, entry{mod: p.addModule(key, fmt.Sprintf("%s(%s)", spelled, m.Name),
				mangle(spelled)+"/"+name, "", m.Name, spelled)})
			continue
		}
		file := filepath.Join(dir, name)
		if err := os.MkdirAll(p.abs(dir), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.abs(file), m.Data, 0o644); err != nil {
			return nil, err
		}
		p.stands(file, spelled)
		ents = append(ents, entry{file: file})
	}
	return ents, nil
}

// mangle turns a path into a relative one that stays inside a directory:
// "/a/b.o" -> "a/b.o", "../x/b.o" -> "__/x/b.o".
func mangle(p string) string {
	p = filepath.ToSlash(filepath.Clean(p))
	p = strings.TrimLeft(p, "/")
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if c == ".." {
			parts[i] = "__"
		}
	}
	return strings.Join(parts, "/")
}
