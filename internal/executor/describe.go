package executor

import (
	"fmt"
	"strings"
)

// Name is ex's String if it has one (every executor of this module does:
// its name and, in parentheses, the executors it wraps, as
// "Fallback(Verified(RemoteExecution), Verified(Local))"), else its type.
func Name(ex Executor) string {
	if s, ok := ex.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", ex)
}

// wraps is the String of a decorator called name around next: name(next...).
func wraps(name string, next ...Executor) string {
	names := make([]string, len(next))
	for i, ex := range next {
		names[i] = Name(ex)
	}
	return name + "(" + strings.Join(names, ", ") + ")"
}

// Describe writes the chain ex as a tree, one executor a line, each
// indented two spaces under the one that wraps it, in the order Name
// lists them. docs/architecture.md shows the chain of each mode so.
func Describe(ex Executor) string {
	var b strings.Builder
	depth := 0
	name := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			b.WriteString(strings.Repeat("  ", depth) + s + "\n")
		}
	}
	s := Name(ex)
	start := 0
	for i, c := range s {
		switch c {
		case '(':
			name(s[start:i])
			depth++
		case ')':
			name(s[start:i])
			depth--
		case ',':
			name(s[start:i])
		default:
			continue
		}
		start = i + 1
	}
	name(s[start:])
	return b.String()
}
