package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/thindist/thindist/internal/atomicfile"
)

// A part is one measured part of the generated section (beginMarker to
// endMarker), between markers of its own (partBegin, partEnd): a run that
// measures some parts replaces theirs and keeps the others.
type part struct {
	name string // one of partOrder
	text string // the part's Markdown, ending in a newline
}

// partOrder is the order of the parts in the generated section.
var partOrder = []string{"machine", "links", "thinlink", "cache", "remote", "overhead", "history"}

// partMarker begins every part's markers.
const partMarker = "<!-- bench:part "

func partBegin(name string) string { return partMarker + name + " -->" }
func partEnd(name string) string   { return partMarker + name + " end -->" }

func (p part) block() string { return partBegin(p.name) + "\n" + p.text + partEnd(p.name) + "\n" }

// spliceParts writes parts into the generated section of the file at path:
// each replaces its own earlier text, or goes where partOrder puts it; the
// parts not measured, and everything outside the section, stay as they
// are. A section without part markers (written before parts had them) is
// replaced whole. The file is created if missing.
func spliceParts(path string, parts []part) error {
	doc, err := readDoc(path)
	if err != nil {
		return err
	}
	inner := "\n"
	if i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker); i >= 0 && j > i {
		if old := doc[i+len(beginMarker) : j]; strings.Contains(old, partMarker) {
			inner = old
		}
	}
	for _, p := range parts {
		inner = replacePart(inner, p)
	}
	return writeDoc(path, splice(doc, beginMarker, endMarker, beginMarker+inner+endMarker+"\n"))
}

// replacePart puts p's block in place of its earlier one in inner, or
// before the first part that partOrder puts after it, or at the end.
func replacePart(inner string, p part) string {
	if b := strings.Index(inner, partBegin(p.name)); b >= 0 {
		if e := strings.Index(inner[b:], partEnd(p.name)); e >= 0 {
			e += b + len(partEnd(p.name))
			if e < len(inner) && inner[e] == '\n' {
				e++
			}
			return inner[:b] + p.block() + inner[e:]
		}
	}
	for _, later := range partOrder[slices.Index(partOrder, p.name)+1:] {
		if k := strings.Index(inner, partBegin(later)); k >= 0 {
			return inner[:k] + p.block() + inner[k:]
		}
	}
	return inner + p.block()
}

// spliceMarkdown replaces the text from begin to end (both included) in the
// file at path by section (which starts with begin and ends with end and a
// newline), or appends section when the markers are not there.
func spliceMarkdown(path, begin, end, section string) error {
	doc, err := readDoc(path)
	if err != nil {
		return err
	}
	return writeDoc(path, splice(doc, begin, end, section))
}

// splice is doc with the text from begin to end (both included, and the
// newline after end) replaced by section, or with section appended when
// the markers are not there.
func splice(doc, begin, end, section string) string {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return appendSection(doc, section)
	}
	j += len(end)
	if j < len(doc) && doc[j] == '\n' {
		j++
	}
	return doc[:i] + section + doc[j:]
}

// readDoc returns the results file's text: a title alone if there is no
// such file yet. Any other error is returned, so that a file that could
// not be read is never replaced by a new one.
func readDoc(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(data), err
}

func appendSection(doc, section string) string {
	if doc == "" {
		return "# thindist benchmark results\n\n" + section
	}
	return doc + "\n" + section
}

// writeDoc replaces the file at path with doc, whole or not at all.
func writeDoc(path, doc string) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, doc)
		return err
	})
}
