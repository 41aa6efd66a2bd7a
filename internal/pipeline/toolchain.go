package pipeline

import (
	"sync"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/llvm/toolchain"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
)

// shipping is a run's use of shipped toolchains (--remote-toolchain): the
// compilers' trees, built once a run and shared by the keys and the
// remote executor, and the warning of a compiler that cannot be shipped.
type shipping struct {
	trees *toolchain.Digests
	warn  func(string, ...any)

	mu     sync.Mutex
	warned map[string]bool
}

// newShipping returns the run's shipping, nil when the workers run their
// own compiler (rc.ShipsToolchain). The trees' files are digested through
// files, the run's memo of the inputs' digests (and the cache's table).
func newShipping(rc *config.Remote, getenv func(string) string, files *digest.Files, warn func(string, ...any)) *shipping {
	if ship, _ := rc.ShipsToolchain(); !ship || rc.Target == "" {
		return nil
	}
	if getenv("CLANG_SPAWN_CC1") != "" {
		// The driver would start cc1 as a new process of its own
		// executable, found through /proc/self/exe: the loader.
		warn("--remote-toolchain: CLANG_SPAWN_CC1 is set, and a shipped clang cannot start cc1 as a process of its own; the workers run their installed compiler")
		return nil
	}
	return &shipping{trees: toolchain.NewDigests(files), warn: warn, warned: map[string]bool{}}
}

// tree is the compiler's tree, nil when it cannot be shipped (said once
// per compiler: its actions then run the workers' installed compiler).
func (s *shipping) tree(compiler string) *toolchain.Tree {
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

// shipped is remote.ExecOptions.Toolchain; nil for a nil s.
func (s *shipping) shipped() func(string) *reapi.Shipped {
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

// identify wraps a compiler's identity (tools.IDs) for the keys: a shipped
// compiler is identified by its whole tree, its libraries too, so that a
// changed library (a new libLLVM under an unchanged clang) misses in the
// caches. id as is for a nil s or a compiler that cannot be shipped.
func (s *shipping) identify(id func(string) (string, error)) func(string) (string, error) {
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
