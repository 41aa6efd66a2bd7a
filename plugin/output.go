package main

import "strings"

// lldLongO are lld's long options that begin with "o" after the dashes:
// lld takes long options with one dash too, so "-omagic" is --omagic, not
// -o magic.
var lldLongO = []string{"oformat", "omagic", "opt-remarks-", "optimize-bb-jumps", "orphan-handling", "out-implib", "output"}

// linkerOutput is the output file named on the command line of the linker
// (the process the plugin runs in), "" when it names none: -o FILE, -oFILE,
// --output FILE, --output=FILE and their single-dash spellings. The plugin
// interface passes no output, yet the run's summary and record name what
// was linked.
func linkerOutput(args []string) string {
	out := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		long := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		switch {
		case !strings.HasPrefix(a, "-"):
		case a == "-o" || long == "output":
			if i+1 < len(args) {
				i++
				out = args[i]
			}
		case strings.HasPrefix(long, "output="):
			out = strings.TrimPrefix(long, "output=")
		case strings.HasPrefix(a, "-o") && !hasAnyPrefix(long, lldLongO):
			out = a[2:]
		}
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
