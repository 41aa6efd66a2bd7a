package config

import "flag"

// suggest returns ` (did you mean PREFIXname?)` for the defined flag
// nearest to name, or "" when none is near: within two edits for a
// name of five letters or more, one for a shorter one.
func (s *FlagSet) suggest(name, prefix string) string {
	limit := 1
	if len(name) >= 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	s.fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 || f.Name == s.configFlag && prefix == "" || s.metas[s.canonical(f.Name)].command && prefix == "" {
			return
		}
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
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
