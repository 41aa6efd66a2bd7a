// Package describe shows a chain of decorators (the executors of a run,
// the runners of its processes) as a tree of values. Each link of a chain
// describes itself as a Node: its name, the notes that set it apart from
// others of that name, and the links it wraps, as the values they are.
// Tree and Line print a chain from those values alone; nothing is parsed
// back from a printed name.
package describe

import (
	"fmt"
	"strings"
)

// Node is how one link of a chain describes itself.
type Node struct {
	// Name is the link's name, as docs/architecture.md's chains show it:
	// "Fallback", "Local", "Exec".
	Name string
	// Notes set the link apart from others of its name ("granted slot",
	// "nice 10"); they are printed after the name in brackets, separated
	// by "; ".
	Notes []string
	// Wraps are the links it hands work to, in the order it documents
	// (for most, the order it tries them). Each is described by Of.
	Wraps []any
}

// Describer is a link of a chain that describes itself.
type Describer interface {
	Describe() Node
}

// Of is x's node: x.Describe() if x is a Describer, else a link that
// wraps nothing, named by x's Go type.
func Of(x any) Node {
	if d, ok := x.(Describer); ok {
		return d.Describe()
	}
	return Node{Name: fmt.Sprintf("%T", x)}
}

// Label is the node's name with its notes: "Local[granted slot; nice 10]".
func (n Node) Label() string {
	if len(n.Notes) == 0 {
		return n.Name
	}
	return n.Name + "[" + strings.Join(n.Notes, "; ") + "]"
}

// Tree writes the chain x as a tree, one link a line (its Label), each
// indented two spaces under the one that wraps it, in the order its
// Wraps lists them.
func Tree(x any) string {
	var b strings.Builder
	tree(&b, x, 0)
	return b.String()
}

func tree(b *strings.Builder, x any, depth int) {
	n := Of(x)
	b.WriteString(strings.Repeat("  ", depth) + n.Label() + "\n")
	for _, w := range n.Wraps {
		tree(b, w, depth+1)
	}
}

// Line writes the chain x on one line, each link's Label followed by the
// links it wraps in parentheses, separated by ", ":
// "Fallback(Verified(RemoteExecution), Verified(Local))". It is the
// String of the links that have one, for logs.
func Line(x any) string {
	n := Of(x)
	if len(n.Wraps) == 0 {
		return n.Label()
	}
	wrapped := make([]string, len(n.Wraps))
	for i, w := range n.Wraps {
		wrapped[i] = Line(w)
	}
	return n.Label() + "(" + strings.Join(wrapped, ", ") + ")"
}
