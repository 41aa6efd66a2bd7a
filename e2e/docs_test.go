package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docPages are the Markdown pages whose links TestDocLinksResolve checks:
// the front page, every page of docs/, and the benchmark's.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "plugin/README.md", "bench/RESULTS.md", "bench/history/JOURNAL.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

// TestDocLinksResolve: every relative link of the pages (`[text](path)`,
// `[text](path#anchor)`, `[text](#anchor)`) names a file of the tree, and
// its anchor a heading of that file, so a page moved or a heading renamed
// cannot leave a link pointing nowhere.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, page := range docPages(t, root) {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, filepath.FromSlash(page))
			if file != "" {
				path = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if anchor == "" {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path)
			}
			if !anchors[path][anchor] {
				t.Errorf("%s links to %s, but %s has no heading with the anchor #%s", page, target, file, anchor)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found: is the pattern out of date?")
	}
}

// withoutCode is a Markdown text without its fenced code blocks, whose
// brackets are code, not links.
func withoutCode(text string) string {
	return regexp.MustCompile("(?ms)^```.*?^```").ReplaceAllString(text, "")
}

// headingAnchors returns the anchors GitHub gives the headings of the
// Markdown file at path: the heading lowercased, without punctuation
// but hyphens and underscores, its spaces hyphens.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(withoutCode(string(data)), "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestPagesStayShort: the front page stays a front page and the results
// page the current figures (issue 51): what grows beyond goes to docs/ and
// to the journal.
func TestPagesStayShort(t *testing.T) {
	root := repoRoot(t)
	for _, p := range []struct {
		page string
		max  int
	}{{"README.md", 249}, {"bench/RESULTS.md", 400}} {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.page)))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "\n"); n > p.max {
			t.Errorf("%s has %d lines, more than %d: move what is not its job elsewhere", p.page, n, p.max)
		}
	}
}
