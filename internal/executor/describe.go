package executor

import "github.com/thindist/thindist/internal/sys/describe"

// Every executor of this module is a describe.Describer: its name, its
// notes and the executors it wraps, as values. Its String, for logs, is
// describe.Line of the same node: "Fallback(Verified(RemoteExecution),
// Verified(Local))".

// node is the describe.Node of a decorator called name around next.
func node(name string, next ...Executor) describe.Node {
	wraps := make([]any, len(next))
	for i, ex := range next {
		wraps[i] = ex
	}
	return describe.Node{Name: name, Wraps: wraps}
}

// Describe writes the chain ex as a tree (describe.Tree), one executor a
// line, each indented two spaces under the one that wraps it, in the
// order it wraps them. docs/architecture.md shows the chain of each mode
// so.
func Describe(ex Executor) string { return describe.Tree(ex) }
