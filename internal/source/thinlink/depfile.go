// The linker's --dependency-file, made to name what the command named.

package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// lld's --dependency-file lists every file the link read, for a build
// tool (Ninja, Make) to relink when one changes. thindist's links read
// files of the work directory in place of the command's inputs (the
// modules under their names, native objects, archive members written
// out), which are gone when the link is over: a build tool would find its
// dependencies missing and link again every time. So the file is written
// again as an in-process link writes it: each of those files replaced by
// the input it stands for (a plain object's path, an archive's), once.

// stands records, for the dependency file, that file (as given to the
// linker) stands for the command's input given.
func (p *plan) stands(file, given string) {
	p.standsFor[filepath.Clean(file)] = given
}

// rewriteDepFile rewrites the link's dependency file, if it asks for one,
// so that it names the command's inputs (see above). A file it cannot read
// as lld writes it is left as it is, with a warning.
func (p *plan) rewriteDepFile() {
	if p.line.depFile == "" {
		return
	}
	for _, m := range p.order {
		p.stands(m.Key, m.input)
		if m.Native != "" {
			p.stands(m.Native, m.input)
		}
	}
	path := p.abs(p.line.depFile)
	data, err := os.ReadFile(path)
	if err == nil {
		var out []byte
		if out, err = p.renameDeps(data); err == nil {
			err = atomicfile.WriteFile(path, out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(p.opts.Stderr, "thindist: warning: the dependency file %s names the work directory's files "+
			"instead of the command's inputs (%v); a build tool reading it will link again every time: "+
			"delete it after the link, or link without --dependency-file\n", p.line.depFile, err)
	}
}

// renameDeps parses a dependency file as lld writes it ("target: \",
// then " dep \" lines, the last without " \", then a "dep:" rule for each)
// and writes it again with every dependency renamed, each once.
func (p *plan) renameDeps(data []byte) ([]byte, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 || !strings.HasSuffix(lines[0], ": \\") {
		return nil, fmt.Errorf("not a dependency file as lld writes it")
	}
	var deps []string
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		dep, more := strings.CutSuffix(l, " \\")
		dep, ok := strings.CutPrefix(dep, " ")
		if !ok {
			return nil, fmt.Errorf("unexpected line %q", l)
		}
		dep = unescapeDep(dep)
		if given, ok := p.standsFor[filepath.Clean(dep)]; ok {
			dep = filepath.Clean(given)
		} else if p.inWork(dep) {
			return nil, fmt.Errorf("%s stands for no input of the command", dep)
		}
		if !seen[dep] {
			seen[dep] = true
			deps = append(deps, dep)
		}
		if !more {
			break
		}
	}
	var b strings.Builder
	b.WriteString(lines[0])
	for i, d := range deps {
		b.WriteString("\n " + escapeDep(d))
		if i < len(deps)-1 {
			b.WriteString(" \\")
		}
	}
	b.WriteString("\n")
	for _, d := range deps {
		b.WriteString("\n" + escapeDep(d) + ":\n")
	}
	return []byte(b.String()), nil
}

// inWork reports whether path names a file of the work directory.
func (p *plan) inWork(path string) bool {
	rel, err := filepath.Rel(filepath.Clean(p.abs(p.work)), filepath.Clean(p.abs(path)))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// escapeDep writes a file name as lld's dependency file does: '#' and ' '
// (with the backslashes before it doubled) after a backslash, '$' doubled.
func escapeDep(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '#':
			b.WriteByte('\\')
		case ' ':
			b.WriteByte('\\')
			for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
				b.WriteByte('\\')
			}
		case '$':
			b.WriteByte('$')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDep reverses escapeDep.
func unescapeDep(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '$':
			i++
		case s[i] == '\\':
			// A run of backslashes before a space or '#' is escaped (the
			// run's second half, then the character); elsewhere literal.
			j := i
			for j < len(s) && s[j] == '\\' {
				j++
			}
			if j < len(s) && (s[j] == ' ' || s[j] == '#') {
				n := j - i
				if s[j] == ' ' {
					n /= 2 // each literal backslash was doubled, plus one
				} else {
					n--
				}
				b.WriteString(strings.Repeat("\\", n))
				b.WriteByte(s[j])
				i = j
				continue
			}
			b.WriteString(s[i:j])
			i = j - 1
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
