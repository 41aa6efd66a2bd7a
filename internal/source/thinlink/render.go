// Writing the link command back for the thin and final links.

package thinlink

// render writes the link command back with each replaced item rendered by
// repl (as linker arguments); items repl returns nil for stay as they were.
func (p *plan) render(repl func(i int, it item) ([]string, bool)) []string {
	var out []string
	for i, it := range p.line.items {
		if toks, ok := repl(i, it); ok {
			for _, t := range toks {
				out = append(out, p.line.wrap(t)...)
			}
			continue
		}
		out = append(out, it.orig...)
	}
	return out
}

// group renders files for the linker: plain ones are always linked, lazy
// ones only if they define a symbol the link needs (--start-lib/--end-lib,
// the semantics of archive members). Under --whole-archive all are plain;
// inside the user's own --start-lib group a plain file closes and reopens
// it; inside the user's own --start-group, lazy files close and reopen the
// group, because lld refuses --start-lib there ("may not nest --start-lib in
// --start-group"). That changes nothing in lld's symbol resolution, which
// remembers every archive's symbols whatever the order; its groups only
// number files for --warn-backrefs.
func group(it item, plain, lazy []string) []string {
	if it.whole {
		plain, lazy = append(plain, lazy...), nil
	}
	out := []string{}
	if it.lazy {
		if len(plain) > 0 {
			out = append(append(append(out, "--end-lib"), plain...), "--start-lib")
		}
		return append(out, lazy...)
	}
	out = append(out, plain...)
	if len(lazy) > 0 {
		lib := append(append([]string{"--start-lib"}, lazy...), "--end-lib")
		if it.group {
			lib = append(append([]string{"--end-group"}, lib...), "--start-group")
		}
		out = append(out, lib...)
	}
	return out
}
