package reapi

import (
	"fmt"
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
	// AtRoot are files placed at fixed paths of every input root, outside
	// Dir, their digests in Files: what a runner that starts each command
	// through a program of the input root needs there (Buildbarn's
	// chrooting runner runs /usr/bin/env inside it).
	AtRoot []RootFile
}

// RootFile is a file at a fixed path of the input root.
type RootFile struct {
	Path       string // relative to the input root
	Digest     digest.Digest
	Executable bool
}

// AddTo places s in tree: its subtree at Dir and its files at the root.
func (s *Shipped) AddTo(tree *Tree) error {
	if err := tree.AddSubtree(s.Dir, s.Root); err != nil {
		return err
	}
	for _, f := range s.AtRoot {
		if err := tree.AddFile(f.Path, f.Digest, f.Executable); err != nil {
			return fmt.Errorf("the shipped compiler's %s: %w", f.Path, err)
		}
	}
	return nil
}

// rootFrom is the path from the working directory wd (relative to the
// input root) back to the input root.
func rootFrom(wd string) string {
	if wd == "" || wd == "." {
		return "."
	}
	return strings.TrimSuffix(strings.Repeat("../", strings.Count(wd, "/")+1), "/")
}
