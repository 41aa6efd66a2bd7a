package toolchain

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Dir is where the toolchain sits in every action's input root: its files
// under Dir at their paths on this machine (/usr/lib/llvm-22/bin/clang at
// Dir/usr/lib/llvm-22/bin/clang).
const Dir = ".thindist-toolchain"

// LoaderName is the dynamic loader's name in the tree: it sits beside the
// compiler, not at its own path, so that a compiler that asks the kernel
// where it runs from (/proc/self/exe, which names the loader when the
// loader is started on it) finds its own directory, and its resource
// directory, as it does here.
const LoaderName = ".thindist-ld.so"

// Env is the program that Buildbarn's runner, with
// chroot_into_input_root, starts every command through, inside the input
// root (`/usr/bin/env -- ARGV`, so that the command is looked up after the
// chroot). The tree ships it, with what it loads, at its path on this
// machine at the root (RootFiles), so that such a runner finds it: the
// loader at the path the executable names (PT_INTERP), the libraries
// where the loader, with no ld.so.cache there, finds them. Those are
// mostly the compiler's own (the loader, libc): stored once.
const Env = "/usr/bin/env"

// Tree is a toolchain as an input root's subtree: its Directory messages
// and file digests.
type Tree struct {
	// Found is what the tree holds.
	Found *Found
	// Root is the digest of the tree's Directory message; Blobs holds it
	// and the messages of its subdirectories.
	Root  digest.Digest
	Blobs map[digest.Digest][]byte
	// Files maps each file's digest to a file on this machine holding
	// it.
	Files map[digest.Digest]string
	// Count and Bytes are the number and total size of the distinct
	// files.
	Count int
	Bytes int64
	// Hashed is how many bytes were read to digest the tree: 0 when every
	// digest was remembered (Digests).
	Hashed int64
	// RootFiles are Env and what it loads, at the input root (none if
	// this machine has no Env that can be shipped).
	RootFiles []reapi.RootFile
	// argv0: the loader takes --argv0 (glibc 2.33+).
	argv0   bool
	shipped *reapi.Shipped
}

// Argv is the start of a command that runs the shipped compiler, from a
// working directory whence root (e.g. "../..") is the input root: what
// replaces the compiler's path. A dynamically linked compiler is started
// by the shipped loader, on the shipped libraries' directories, with the
// argv[0] it was given here (the name the driver reads its mode from:
// clang, clang++, clang-cl) naming the shipped compiler.
func (t *Tree) Argv(root string) []string {
	at := func(host string) string { return path.Join(root, Dir, strings.TrimPrefix(host, "/")) }
	f := t.Found
	if f.Interp == "" {
		return []string{at(f.Invoked)}
	}
	var dirs []string
	for _, d := range f.Dirs() {
		dirs = append(dirs, at(d))
	}
	argv := []string{at(path.Join(path.Dir(f.Compiler), LoaderName)), "--library-path", strings.Join(dirs, ":")}
	if t.argv0 {
		argv = append(argv, "--argv0", at(f.Invoked))
	}
	return append(argv, at(f.Compiler))
}

// Shipped is the tree as the remote action takes it, the same for every
// call.
func (t *Tree) Shipped() *reapi.Shipped { return t.shipped }

// Digests builds toolchains' trees, once per compiler in a run. Their
// files' digests come from a digest.Files, which remembers them across
// runs in the cache directory's digest table (trusted while each file's
// stamp is unchanged), as it does the link's inputs'.
type Digests struct {
	files *digest.Files
	// find finds a compiler's files (Find).
	find func(string) (*Found, error)
	mu   sync.Mutex
	runs map[string]*treeOnce
}

type treeOnce struct {
	once sync.Once
	t    *Tree
	err  error
}

// NewDigests digests toolchains' files through files; nil digests them
// for this run only.
func NewDigests(files *digest.Files) *Digests {
	if files == nil {
		files = digest.NewFiles()
	}
	return &Digests{files: files, find: Find, runs: map[string]*treeOnce{}}
}

// Tree returns the tree of the compiler named compiler, built by the
// first call for that name and shared by the others.
func (d *Digests) Tree(compiler string) (*Tree, error) {
	d.mu.Lock()
	o, ok := d.runs[compiler]
	if !ok {
		o = &treeOnce{}
		d.runs[compiler] = o
	}
	d.mu.Unlock()
	o.once.Do(func() { o.t, o.err = d.build(compiler) })
	return o.t, o.err
}

// build finds the compiler's files, digests them (or takes the digests
// remembered), and encodes the tree.
func (d *Digests) build(compiler string) (*Tree, error) {
	f, err := d.find(compiler)
	if err != nil {
		return nil, err
	}
	t := &Tree{Found: f, Files: map[digest.Digest]string{}}
	get := func(host string) (digest.Digest, error) {
		dg, hashed, err := d.files.GetHashing(host)
		if hashed {
			t.Hashed += dg.Size
		}
		return dg, err
	}
	tree := reapi.NewTree()
	file := func(host string) (digest.Digest, error) {
		dg, err := get(host)
		if err != nil {
			return dg, fmt.Errorf("toolchain of %s: %w", compiler, err)
		}
		if _, dup := t.Files[dg]; !dup {
			t.Count++
			t.Bytes += dg.Size
			t.Files[dg] = host
		}
		return dg, nil
	}
	add := func(at, host string, exec bool) error {
		dg, err := file(host)
		if err != nil {
			return err
		}
		return tree.AddFile(strings.TrimPrefix(at, "/"), dg, exec)
	}
	if err := add(f.Compiler, f.Compiler, true); err != nil {
		return nil, err
	}
	if f.Invoked != f.Compiler {
		rel, err := filepath.Rel(filepath.Dir(f.Invoked), f.Compiler)
		if err != nil {
			return nil, err
		}
		if err := tree.AddSymlink(strings.TrimPrefix(f.Invoked, "/"), rel); err != nil {
			return nil, err
		}
	}
	if f.Interp != "" {
		if err := add(path.Join(path.Dir(f.Compiler), LoaderName), f.Loader, true); err != nil {
			return nil, err
		}
		t.argv0 = takesArgv0(f.Loader)
	}
	for _, l := range f.Libs {
		if err := add(l.Path, l.Real, false); err != nil {
			return nil, err
		}
	}
	if t.Root, t.Blobs, err = tree.Build(); err != nil {
		return nil, fmt.Errorf("toolchain of %s: %w", compiler, err)
	}
	if env, err := d.find(Env); err == nil {
		// Without it, runners that need it do not run the compiler,
		// and the others do as they would.
		if t.RootFiles, err = rootFiles(env, file); err != nil {
			return nil, err
		}
	}
	t.shipped = &reapi.Shipped{Dir: Dir, Root: t.Root, Blobs: t.Blobs, Files: t.Files, Argv: t.Argv, AtRoot: t.RootFiles}
	return t, nil
}

// rootFiles places the program f found at its paths on this machine: the
// executable at the path it was named by, the loader at the one it
// names, the libraries where the loader found them; file digests each.
func rootFiles(f *Found, file func(host string) (digest.Digest, error)) ([]reapi.RootFile, error) {
	var out []reapi.RootFile
	put := func(at, host string, exec bool) error {
		dg, err := file(host)
		if err == nil {
			out = append(out, reapi.RootFile{Path: strings.TrimPrefix(at, "/"), Digest: dg, Executable: exec})
		}
		return err
	}
	if err := put(f.Invoked, f.Compiler, true); err != nil {
		return nil, err
	}
	if f.Interp != "" {
		if err := put(f.Interp, f.Loader, true); err != nil {
			return nil, err
		}
	}
	for _, l := range f.Libs {
		if err := put(l.Path, l.Real, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// takesArgv0 reports whether the loader at p knows --argv0 (glibc 2.33+).
func takesArgv0(p string) bool {
	b, err := plainfile.ReadFile(p)
	return err == nil && bytes.Contains(b, []byte("--argv0"))
}
