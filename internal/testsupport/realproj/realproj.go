// Package realproj builds real projects from Debian source packages as ThinLTO
// bitcode, up to (but not including) their final link, so tests and the
// benchmark can link the same objects through thindist, through lld's
// in-process ThinLTO, or through any other distributor.
//
// The sources come from scripts/debsrc.sh, which unpacks a package under
// $THINDIST_DEBSRC (default /var/cache/thindist-debsrc).
package realproj

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// DefaultDebSrc is where scripts/debsrc.sh unpacks source packages when
// THINDIST_DEBSRC is not set.
const DefaultDebSrc = "/var/cache/thindist-debsrc"

// ErrNoSource means the source package has not been unpacked (run
// scripts/debsrc.sh).
var ErrNoSource = errors.New("source package not unpacked")

// DebSrcDir returns the directory source packages are unpacked in.
func DebSrcDir() string {
	if d := os.Getenv("THINDIST_DEBSRC"); d != "" {
		return d
	}
	return DefaultDebSrc
}

// FindSource returns the unpacked tree of the Debian source package pkg
// (DebSrcDir()/pkg-VERSION, the newest if there are several). The error wraps
// ErrNoSource when there is none.
func FindSource(pkg string) (string, error) {
	base := DebSrcDir()
	matches, _ := filepath.Glob(filepath.Join(base, pkg+"-*"))
	var trees []string
	for _, m := range matches {
		if fi, err := os.Stat(filepath.Join(m, "debian", "changelog")); err == nil && !fi.IsDir() {
			trees = append(trees, m)
		}
	}
	if len(trees) == 0 {
		return "", fmt.Errorf("%w: no %s-* tree in %s (run scripts/debsrc.sh %s %s)", ErrNoSource, pkg, base, pkg, base)
	}
	sort.Strings(trees)
	return trees[len(trees)-1], nil
}

// Toolchain names the LLVM tools a build uses.
type Toolchain struct {
	Clang string // a clang driver, e.g. /usr/lib/llvm-22/bin/clang
	AR    string // llvm-ar (GNU ar cannot index bitcode members without the plugin)
}

// DefaultToolchain is Debian's LLVM 22: /usr/lib/llvm-22/bin, or clang-22 and
// llvm-ar-22 from PATH.
func DefaultToolchain() Toolchain {
	pick := func(full, short string) string {
		if _, err := os.Stat(full); err == nil {
			return full
		}
		if p, err := exec.LookPath(short); err == nil {
			return p
		}
		return full
	}
	return Toolchain{
		Clang: pick("/usr/lib/llvm-22/bin/clang", "clang-22"),
		AR:    pick("/usr/lib/llvm-22/bin/llvm-ar", "llvm-ar-22"),
	}
}

// Build is a project compiled to ThinLTO bitcode and ready for its final
// link.
type Build struct {
	Name string
	// Dir is the build directory; the link runs in it and every path below
	// is relative to it.
	Dir string
	// Objects are the bitcode objects linked directly, in link order.
	Objects []string
	// Archives are static archives (regular, not thin) of bitcode objects,
	// linked after Objects.
	Archives []string
	// Libs are the system libraries and linker flags that end the link line
	// (-lm, -Wl,-E, ...).
	Libs []string
	// CFlags are the code generation flags the objects were compiled with;
	// the link must repeat the ones that matter to code generation (-O2).
	CFlags []string
	// Modules counts the bitcode modules the link compiles (one backend job
	// each).
	Modules int
}

// LinkArgs returns the clang arguments (without the driver itself) that link
// b into out with lld and ThinLTO; add -fthinlto-distributor=... for DTLTO or
// -Wl,--thinlto-jobs=N for the in-process backends.
func (b *Build) LinkArgs(out string, extra ...string) []string {
	args := []string{"-flto=thin", "-fuse-ld=lld"}
	args = append(args, b.CFlags...)
	args = append(args, extra...)
	args = append(args, b.Objects...)
	args = append(args, b.Archives...)
	args = append(args, b.Libs...)
	return append(args, "-o", out)
}

// compileAll compiles each source (relative to srcDir) to dir/<base>.o with
// clang and flags, using every CPU.
func compileAll(ctx context.Context, tc Toolchain, srcDir, dir string, sources, flags []string) ([]string, error) {
	objs := make([]string, len(sources))
	errs := make([]error, len(sources))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, s := range sources {
		obj := strings.TrimSuffix(filepath.Base(s), filepath.Ext(s)) + ".o"
		objs[i] = obj
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			args := append(append([]string{}, flags...), "-c", filepath.Join(srcDir, s), "-o", obj)
			errs[i] = run(ctx, dir, tc.Clang, args...)
		}()
	}
	wg.Wait()
	return objs, errors.Join(errs...)
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
