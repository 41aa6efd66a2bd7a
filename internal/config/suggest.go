package config

import (
	"flag"
	"fmt"
	"strings"
)

// suggest returns ` (did you mean PREFIXname?)` for the defined flag
// nearest to name (Nearest), or "" when none is near. A config file's
// line (prefix "") may also mean another command's setting (Know).
func (s *FlagSet) suggest(name, prefix string) string {
	var names []string
	s.fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 || f.Name == s.configFlag && prefix == "" || s.metas[s.canonical(f.Name)].command && prefix == "" {
			return
		}
		names = append(names, f.Name)
	})
	if prefix == "" {
		for _, o := range s.others {
			names = append(names, o.order...)
		}
	}
	if best := Nearest(name, names); best != "" {
		return " (did you mean " + prefix + best + "?)"
	}
	return ""
}

// Nearest returns the candidate nearest to name, or "" when none is near:
// within two edits (editDistance) for a name of five letters or more, one
// for a shorter one; else the one candidate name of three letters or more
// begins (stat: status).
func Nearest(name string, candidates []string) string {
	limit := 1
	if len(name) >= 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	var starting []string
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
		if len(name) >= 3 && strings.HasPrefix(c, name) {
			starting = append(starting, c)
		}
	}
	if best == "" && len(starting) == 1 {
		return starting[0]
	}
	return best
}

// otherVariables begin the THINDIST_* variables that are no setting's:
// thindist's own for its children, and those of its scripts and tests.
// CheckEnviron says nothing of them.
var otherVariables = []string{
	"THINDIST_FORKSERVER_", // forkserver: the server's descriptors, for the processes it forks
	"THINDIST_DEBSRC",      // scripts/debsrc.sh, scripts/test.sh, internal/testsupport/realproj: Debian sources
	"THINDIST_KERNEL_",     // scripts/kernel-test.sh, scripts/kernel-bench.sh
	"THINDIST_BENCH",       // bench/
	"THINDIST_E2E_",        // e2e, internal/testsupport/testprog: the LLVM the tests use
	"THINDIST_SOAK_",       // e2e's soak test
	"THINDIST_TEST",        // tests' helper processes
	"THINDIST_IN_NETNS",    // internal/remote's tests
}

// CheckEnviron adds to Warnings every THINDIST_* variable of environ
// (KEY=VALUE entries, as os.Environ) that no setting of s or of the sets
// it knows reads, with the setting it may mean (THINDIST_JBOS: jobs): a
// misspelt variable is not silently without effect. Variables of a
// command's options (THINDIST_ZERO) are said to be read from nowhere.
func (s *FlagSet) CheckEnviron(environ []string) {
	known := map[string]bool{}
	var names []string
	for _, set := range append([]*FlagSet{s}, s.others...) {
		for _, n := range set.order {
			if !set.metas[n].command {
				known[EnvName(n)] = true
				names = append(names, n)
			}
		}
	}
	for _, kv := range environ {
		key, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(key, "THINDIST_")
		if !ok || known[key] || rest == "" || hasAnyPrefix(key, otherVariables) {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		if m, ok := s.metas[name]; ok && m.command {
			s.warnings = append(s.warnings, fmt.Sprintf("%s: --%s is an option of the command, read from its command line only; variable ignored", key, name))
			continue
		}
		hint := "'thindist help settings' lists them"
		if best := Nearest(name, names); best != "" {
			hint = "did you mean " + EnvName(best) + "?"
		}
		s.warnings = append(s.warnings, fmt.Sprintf("%s is no setting's variable (%s); variable ignored", key, hint))
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// editDistance is the number of insertions, deletions, substitutions and
// swaps of two neighbouring letters that turn a into b (optimal string
// alignment distance): "jbos" is one edit from "jobs".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
