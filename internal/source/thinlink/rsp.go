package thinlink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// expandResponseFiles replaces every @file argument by the arguments it
// holds, as clang does on Linux: GNU quoting, nested files resolved relative
// to the file that names them, top-level ones relative to dir. An @file that
// cannot be read stays as it is (clang does the same, and then reports it).
func expandResponseFiles(args []string, dir string) ([]string, error) {
	return expandRsp(args, dir, 0)
}

func expandRsp(args []string, dir string, depth int) ([]string, error) {
	if depth > 20 {
		return nil, fmt.Errorf("response files nested more than 20 deep")
	}
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "@") || len(a) == 1 {
			out = append(out, a)
			continue
		}
		p := a[1:]
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			out = append(out, a)
			continue
		}
		sub, err := expandRsp(tokenizeGNU(string(data)), filepath.Dir(p), depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		out = append(out, sub...)
	}
	return out, nil
}

// tokenizeGNU splits a response file the way LLVM's TokenizeGNUCommandLine
// does: whitespace separates arguments, single and double quotes group, and a
// backslash escapes the next character, inside quotes too.
func tokenizeGNU(s string) []string {
	var out []string
	var tok strings.Builder
	inTok := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inTok {
				out = append(out, tok.String())
				tok.Reset()
				inTok = false
			}
		case c == '\\' && i+1 < len(s):
			i++
			tok.WriteByte(s[i])
			inTok = true
		case c == '"' || c == '\'':
			inTok = true
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				tok.WriteByte(s[i])
			}
		default:
			tok.WriteByte(c)
			inTok = true
		}
	}
	if inTok {
		out = append(out, tok.String())
	}
	return out
}

// writeResponseFile writes args so that tokenizeGNU (and clang) read them
// back unchanged.
func writeResponseFile(path string, args []string) error {
	var b strings.Builder
	for _, a := range args {
		b.WriteByte('"')
		for i := 0; i < len(a); i++ {
			if a[i] == '"' || a[i] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(a[i])
		}
		b.WriteString("\"\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
