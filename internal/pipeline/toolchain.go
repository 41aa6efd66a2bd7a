package pipeline

import (
	"path/filepath"
	"sync"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/reapi"
	"github.com/thindist/thindist/internal/toolchain"
)

// shippedToolchain returns what the remote executor asks for the toolchain
// to ship with the actions of a compiler (remote.ExecOptions.Toolchain):
// nil when the workers run their own (--remote-toolchain, ShipsToolchain),
// else the compiler's tree, its digests remembered under dir (the cache
// directory's "compilers", as the compilers' identities are; "" for
// none). A compiler that cannot be shipped is run as installed, with a
// warning naming what is missing, once per compiler.
func shippedToolchain(rc *config.Remote, getenv func(string) string, dir string, warn func(string, ...any)) func(string) *reapi.Shipped {
	if ship, _ := rc.ShipsToolchain(); !ship {
		return nil
	}
	if getenv("CLANG_SPAWN_CC1") != "" {
		// The driver would start cc1 as a new process of its own
		// executable, found through /proc/self/exe: the loader.
		warn("--remote-toolchain: CLANG_SPAWN_CC1 is set, and a shipped clang cannot start cc1 as a process of its own; the workers run their installed compiler")
		return nil
	}
	if dir != "" {
		dir = filepath.Join(dir, "compilers")
	}
	digests := toolchain.NewDigests(dir)
	var mu sync.Mutex
	warned := map[string]bool{}
	return func(compiler string) *reapi.Shipped {
		t, err := digests.Tree(compiler)
		if err == nil {
			return t.Shipped()
		}
		mu.Lock()
		defer mu.Unlock()
		if !warned[compiler] {
			warned[compiler] = true
			warn("%v; the workers run their installed compiler (--remote-toolchain=installed)", err)
		}
		return nil
	}
}
