package toolchain

import (
	"sync"

	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
)

// Shipping is a run's use of shipped toolchains (--remote-toolchain): the
// compilers' trees, built once a run and shared by the keys (Identify)
// and the remote executor (Shipped), and the warning of a compiler that
// cannot be shipped, said once per compiler. A nil *Shipping ships
// nothing: the workers run their installed compiler.
type Shipping struct {
	trees *Digests
	warn  func(string, ...any)

	mu     sync.Mutex
	warned map[string]bool
}

// NewShipping returns the run's shipping, its trees' files digested
// through files (the run's memo of the inputs' digests, and the cache's
// table); nil, with a warning, when the environment (getenv) makes a
// shipped compiler unable to run.
func NewShipping(getenv func(string) string, files *digest.Files, warn func(string, ...any)) *Shipping {
	if getenv("CLANG_SPAWN_CC1") != "" {
		// The driver would start cc1 as a new process of its own
		// executable, found through /proc/self/exe: the loader.
		warn("--remote-toolchain: CLANG_SPAWN_CC1 is set, and a shipped clang cannot start cc1 as a process of its own; the workers run their installed compiler")
		return nil
	}
	return &Shipping{trees: NewDigests(files), warn: warn, warned: map[string]bool{}}
}

// tree is the compiler's tree, nil when it cannot be shipped (said once
// per compiler: its actions then run the workers' installed compiler).
func (s *Shipping) tree(compiler string) *Tree {
	t, err := s.trees.Tree(compiler)
	if err == nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.warned[compiler] {
		s.warned[compiler] = true
		s.warn("%v; the workers run their installed compiler (--remote-toolchain=installed)", err)
	}
	return nil
}

// Shipped is what a remote action ships of each compiler
// (remote.ExecOptions.Toolchain): its tree, or nil when it cannot be
// shipped. Nil for a nil s.
func (s *Shipping) Shipped() func(string) *reapi.Shipped {
	if s == nil {
		return nil
	}
	return func(compiler string) *reapi.Shipped {
		if t := s.tree(compiler); t != nil {
			return t.Shipped()
		}
		return nil
	}
}

// Identify wraps a compiler's identity (tools.IDs) for the keys: a
// shipped compiler is identified by its whole tree, its libraries too, so
// that a changed library (a new libLLVM under an unchanged clang) misses
// in the caches. id as is for a nil s or a compiler that cannot be
// shipped.
func (s *Shipping) Identify(id func(string) (string, error)) func(string) (string, error) {
	if s == nil {
		return id
	}
	return func(compiler string) (string, error) {
		base, err := id(compiler)
		if err != nil {
			return base, err
		}
		if t := s.tree(compiler); t != nil {
			return base + "\x00toolchain=" + t.Root.HexHash(), nil
		}
		return base, nil
	}
}
