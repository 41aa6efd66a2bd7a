// Package toolchain finds the files a compiler executes and reads, so that
// they can travel with each remote action as content-addressed inputs (a
// hermetic toolchain, as Bazel's): the executable, every shared library
// the dynamic loader would load for it, and the loader itself. A worker
// then needs nothing but a Linux kernel of the same architecture.
//
// Libraries are found as glibc's loader finds them, read from the ELF
// headers (debug/elf; ldd is never run): for each DT_NEEDED name, the
// DT_RPATH of the object and of those that loaded it (when the object has
// no DT_RUNPATH), then its DT_RUNPATH, both with $ORIGIN, $LIB and
// $PLATFORM expanded, then /etc/ld.so.cache, then the loader's default
// directories (DefaultDirs). LD_LIBRARY_PATH is not read: the remote
// compile must not depend on the shell that started the link. Within a
// directory, the glibc-hwcaps and legacy tls/x86_64 subdirectories are
// not searched, and ld.so.cache entries for hardware capabilities are
// skipped: those are variants tuned for a CPU, built from the same source
// as the baseline library that is shipped, and the worker's CPU is not
// this machine's. docs/remote-toolchain.md says what else is left out.
package toolchain

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/sys/plainfile"
)

// DefaultDirs are the directories glibc's loader searches last on x86-64
// Debian and Ubuntu (multiarch) and on other distributions (lib64), in
// its order.
var DefaultDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// LdCache is the loader's cache of library locations.
const LdCache = "/etc/ld.so.cache"

// Found is what a compiler executes and reads, by absolute host paths.
type Found struct {
	// Invoked is the compiler as named, made absolute (looked up in
	// PATH when the name has no slash), symbolic links not followed.
	Invoked string
	// Compiler is the executable file Invoked resolves to.
	Compiler string
	// Interp is the program interpreter the executable names
	// (PT_INTERP), "" for a static executable; Loader is the file it
	// resolves to.
	Interp, Loader string
	// Libs are the shared libraries it loads, in the order the loader
	// finds them (breadth first).
	Libs []Lib
}

// Lib is a shared library the loader would load.
type Lib struct {
	// Name is the DT_NEEDED name that asked for it.
	Name string
	// Path is where the loader finds it (its search directory, cleaned,
	// and Name); Real is the file Path resolves to.
	Path, Real string
}

// Dirs returns the directories the libraries were found in, each once, in
// the order they were first used.
func (f *Found) Dirs() []string {
	var dirs []string
	seen := map[string]bool{}
	for _, l := range f.Libs {
		d := filepath.Dir(l.Path)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Finder finds toolchains; its fields say where the loader looks.
type Finder struct {
	// Cache is the loader's cache file (LdCache); "" or a missing file:
	// none.
	Cache string
	// Dirs are the loader's default directories (DefaultDirs).
	Dirs []string
}

// Find is a Finder with this machine's cache and default directories.
func Find(compiler string) (*Found, error) {
	return (&Finder{Cache: LdCache, Dirs: DefaultDirs}).Find(compiler)
}

// Find returns what the compiler named compiler (a path, or a command
// name looked up in PATH) executes and reads. An error names what cannot
// be packaged: a script or other non-ELF file, an ELF of another kind, or
// a library the loader would not find.
func (fd *Finder) Find(compiler string) (*Found, error) {
	invoked := compiler
	if !strings.ContainsRune(compiler, '/') {
		p, err := exec.LookPath(compiler)
		if err != nil {
			return nil, fmt.Errorf("compiler %s: %w", compiler, err)
		}
		invoked = p
	}
	invoked, err := filepath.Abs(invoked)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(invoked)
	if err != nil {
		return nil, fmt.Errorf("compiler %s: %w", compiler, err)
	}
	exe, err := openELF(real)
	if err != nil {
		return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: %w", compiler, err)
	}
	defer exe.Close()
	if exe.Type != elf.ET_EXEC && exe.Type != elf.ET_DYN {
		return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: %s is an ELF %s, not an executable", compiler, real, exe.Type)
	}
	f := &Found{Invoked: invoked, Compiler: real}
	for _, p := range exe.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("compiler %s: reading its interpreter: %w", real, err)
		}
		f.Interp = string(bytes.TrimRight(b, "\x00"))
		if f.Loader, err = filepath.EvalSymlinks(f.Interp); err != nil {
			return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: its dynamic loader %s: %w", real, f.Interp, err)
		}
	}
	needed, err := exe.dyn(elf.DT_NEEDED)
	if err != nil {
		return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: %w", compiler, err)
	}
	if len(needed) > 0 && f.Interp == "" {
		return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: it needs shared libraries but names no dynamic loader", real)
	}
	if f.Interp == "" {
		return f, nil // static: the executable alone
	}
	cache, err := readLdCache(fd.Cache)
	if err != nil {
		return nil, err
	}
	r := &resolver{fd: fd, cache: cache, class: exe.Class, machine: exe.Machine,
		interp: filepath.Base(f.Interp), seen: map[string]bool{}}
	if err := r.walk(f, real, exe); err != nil {
		return nil, fmt.Errorf("compiler %s cannot be shipped to the workers: %w", compiler, err)
	}
	return f, nil
}

// resolver finds the libraries of one executable, breadth first.
type resolver struct {
	fd      *Finder
	cache   map[string][]string // soname -> paths, in the cache's order
	class   elf.Class
	machine elf.Machine
	interp  string // the loader's base name: it is loaded already
	seen    map[string]bool
	queue   []pending
}

// pending is a loaded object whose DT_NEEDED are still to be resolved.
type pending struct {
	path   string // where it was found (for $ORIGIN)
	rpaths []string
}

// walk resolves the needs of exe, at exePath, and of every library they
// bring in, breadth first as the loader does.
func (r *resolver) walk(f *Found, exePath string, exe *object) error {
	if err := r.needs(f, exePath, exe, nil); err != nil {
		return err
	}
	for len(r.queue) > 0 {
		p := r.queue[0]
		r.queue = r.queue[1:]
		obj, err := openELF(p.path)
		if err != nil {
			return err
		}
		err = r.needs(f, p.path, obj, p.rpaths)
		obj.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// needs resolves the DT_NEEDED of obj, found at path and loaded by objects
// whose DT_RPATHs are inherited.
func (r *resolver) needs(f *Found, path string, obj *object, inherited []string) error {
	needed, err := obj.dyn(elf.DT_NEEDED)
	if err != nil {
		return err
	}
	runpath, err := dynPaths(obj, elf.DT_RUNPATH, path)
	if err != nil {
		return err
	}
	var rpaths []string
	if len(runpath) == 0 {
		// DT_RPATH counts only without a DT_RUNPATH; it applies to the
		// object's own needs and to those of what it loads.
		own, err := dynPaths(obj, elf.DT_RPATH, path)
		if err != nil {
			return err
		}
		rpaths = append(own, inherited...)
	}
	for _, name := range needed {
		if r.seen[name] || name == r.interp {
			continue
		}
		r.seen[name] = true
		lib, err := r.find(name, rpaths, runpath)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", path, name, err)
		}
		f.Libs = append(f.Libs, lib)
		r.queue = append(r.queue, pending{path: lib.Path, rpaths: rpaths})
	}
	return nil
}

// find looks for the library name in the loader's order.
func (r *resolver) find(name string, rpaths, runpath []string) (Lib, error) {
	if strings.ContainsRune(name, '/') {
		return r.try(filepath.Clean(name))
	}
	var dirs []string
	dirs = append(dirs, rpaths...)
	dirs = append(dirs, runpath...)
	var tried []string
	for _, d := range dirs {
		if l, err := r.try(filepath.Join(d, name)); err == nil {
			return l, nil
		}
		tried = append(tried, d)
	}
	for _, p := range r.cache[name] {
		if l, err := r.try(p); err == nil {
			return l, nil
		}
	}
	for _, d := range r.fd.Dirs {
		if l, err := r.try(filepath.Join(d, name)); err == nil {
			return l, nil
		}
		tried = append(tried, d)
	}
	where := "the loader's cache " + r.fd.Cache
	if len(tried) > 0 {
		where = strings.Join(tried, ", ") + " or " + where
	}
	return Lib{}, fmt.Errorf("not found in %s", where)
}

// try returns the library at p if it is an ELF shared object of the
// executable's class and machine (the loader skips others).
func (r *resolver) try(p string) (Lib, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Lib{}, err
	}
	obj, err := openELF(real)
	if err != nil {
		return Lib{}, err
	}
	defer obj.Close()
	if obj.Class != r.class || obj.Machine != r.machine {
		return Lib{}, fmt.Errorf("%s is %s %s", p, obj.Class, obj.Machine)
	}
	return Lib{Name: filepath.Base(p), Path: p, Real: real}, nil
}

// dynPaths returns the directories of obj's DT_RPATH or DT_RUNPATH,
// cleaned, with $ORIGIN (the directory of path), $LIB and $PLATFORM
// expanded.
func dynPaths(obj *object, tag elf.DynTag, path string) ([]string, error) {
	vals, err := obj.dyn(tag)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, v := range vals {
		for _, d := range strings.Split(v, ":") {
			if d == "" {
				continue
			}
			for _, o := range []string{"$ORIGIN", "${ORIGIN}"} {
				d = strings.ReplaceAll(d, o, filepath.Dir(path))
			}
			for _, o := range []string{"$LIB", "${LIB}"} {
				d = strings.ReplaceAll(d, o, libDir(obj))
			}
			for _, o := range []string{"$PLATFORM", "${PLATFORM}"} {
				d = strings.ReplaceAll(d, o, platform(obj))
			}
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs, nil
}

// libDir is what glibc expands $LIB to on Debian for obj's class.
func libDir(obj *object) string {
	if obj.Machine == elf.EM_X86_64 {
		return "lib/x86_64-linux-gnu"
	}
	return "lib"
}

// platform is what glibc expands $PLATFORM to.
func platform(obj *object) string {
	if obj.Machine == elf.EM_X86_64 {
		return "x86_64"
	}
	return strings.ToLower(strings.TrimPrefix(obj.Machine.String(), "EM_"))
}

// object is an ELF file open for reading.
type object struct {
	*elf.File
	f    *os.File
	path string
}

// dyn returns obj's dynamic string entries with tag (dynStrings).
func (o *object) dyn(tag elf.DynTag) ([]string, error) {
	v, err := dynStrings(o.File, o.f, tag)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.path, err)
	}
	return v, nil
}

// Close closes the file.
func (o *object) Close() error { return o.f.Close() }

// openELF opens the ELF file at path; a file that is not one (a script)
// is named as such.
func openELF(path string) (*object, error) {
	var head [4]byte
	n, err := plainfile.ReadHead(path, head[:])
	if err != nil {
		return nil, err
	}
	if n < 4 || string(head[:]) != elf.ELFMAG {
		what := "not an ELF file"
		if n >= 2 && string(head[:2]) == "#!" {
			what = "a script, not an ELF executable (ship the compiler it runs instead)"
		}
		return nil, fmt.Errorf("%s is %s", path, what)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	e, err := elf.NewFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &object{File: e, f: f, path: path}, nil
}
