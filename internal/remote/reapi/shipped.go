package reapi

import (
	"strings"

	"github.com/thindist/thindist/internal/sys/digest"
)

// Shipped is a compiler that travels with each action as inputs (a
// hermetic toolchain, package toolchain builds it): a subtree of the input
// root, and the command start that runs it from there.
type Shipped struct {
	// Dir is where the subtree sits in the input root.
	Dir string
	// Root is the digest of the subtree's Directory message; Blobs
	// holds its messages, Files its files (digest -> local path). They
	// are the same for every action: the caller makes them present in
	// the CAS once, and the executable holds only its own.
	Root  digest.Digest
	Blobs map[digest.Digest][]byte
	Files map[digest.Digest]string
	// Argv returns what replaces the compiler's path in the command,
	// with the paths relative to a working directory whence root is the
	// input root.
	Argv func(root string) []string
}

// rootFrom is the path from the working directory wd (relative to the
// input root) back to the input root.
func rootFrom(wd string) string {
	if wd == "" || wd == "." {
		return "."
	}
	return strings.TrimSuffix(strings.Repeat("../", strings.Count(wd, "/")+1), "/")
}
