package reapi

import (
	"fmt"
	"path"
	"sort"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/sys/digest"
)

// Tree is an input root under construction: files and empty directories at
// slash-separated paths relative to the root.
type Tree struct {
	files    map[string]treeFile
	dirs     map[string]bool
	links    map[string]string        // path -> target
	subtrees map[string]digest.Digest // path -> a Directory built already
}

type treeFile struct {
	d    digest.Digest
	exec bool
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{files: map[string]treeFile{}, dirs: map[string]bool{}, links: map[string]string{}, subtrees: map[string]digest.Digest{}}
}

// inside cleans p, a path relative to the root, or says it leaves it.
func inside(p string) (string, error) {
	p = path.Clean(p)
	if p == "." || strings.HasPrefix(p, "../") || p == ".." || path.IsAbs(p) {
		return "", fmt.Errorf("path %q is outside the input root", p)
	}
	return p, nil
}

// AddSymlink places a symbolic link to target at p.
func (t *Tree) AddSymlink(p, target string) error {
	p, err := inside(p)
	if err != nil {
		return err
	}
	t.links[p] = target
	return nil
}

// AddSubtree places at p the directory whose Directory message has digest
// d, built already (its messages are the caller's to upload).
func (t *Tree) AddSubtree(p string, d digest.Digest) error {
	p, err := inside(p)
	if err != nil {
		return err
	}
	t.subtrees[p] = d
	return nil
}

// AddFile places a file of digest d at p.
func (t *Tree) AddFile(p string, d digest.Digest, executable bool) error {
	p, err := inside(p)
	if err != nil {
		return err
	}
	if old, ok := t.files[p]; ok && old.d != d {
		return fmt.Errorf("two different files at %q", p)
	}
	t.files[p] = treeFile{d: d, exec: executable}
	return nil
}

// AddDir makes sure directory p exists.
func (t *Tree) AddDir(p string) {
	if p = path.Clean(p); p != "." && p != "" {
		t.dirs[p] = true
	}
}

// Build encodes the tree as REAPI Directory messages, children before
// parents, and returns the root's digest and every message by digest.
func (t *Tree) Build() (digest.Digest, map[digest.Digest][]byte, error) {
	type node struct {
		files map[string]treeFile
		dirs  map[string]*node
		links map[string]string
		fixed map[string]digest.Digest
	}
	newNode := func() *node {
		return &node{files: map[string]treeFile{}, dirs: map[string]*node{}, links: map[string]string{}, fixed: map[string]digest.Digest{}}
	}
	root := newNode()
	walk := func(p string) (*node, error) {
		n := root
		if p == "." {
			return n, nil
		}
		for _, c := range strings.Split(p, "/") {
			if _, clash := n.files[c]; clash {
				return nil, fmt.Errorf("%q is both a file and a directory", p)
			}
			child, ok := n.dirs[c]
			if !ok {
				child = newNode()
				n.dirs[c] = child
			}
			n = child
		}
		return n, nil
	}
	for d := range t.dirs {
		if _, err := walk(d); err != nil {
			return digest.Digest{}, nil, err
		}
	}
	for p, f := range t.files {
		dir, name := path.Split(p)
		n, err := walk(path.Clean(dir))
		if err != nil {
			return digest.Digest{}, nil, err
		}
		if _, clash := n.dirs[name]; clash {
			return digest.Digest{}, nil, fmt.Errorf("%q is both a file and a directory", p)
		}
		n.files[name] = f
	}
	// leaf finds the directory of p's last element, which must be free.
	leaf := func(p string) (*node, string, error) {
		dir, name := path.Split(p)
		n, err := walk(path.Clean(dir))
		if err != nil {
			return nil, "", err
		}
		_, isFile := n.files[name]
		_, isDir := n.dirs[name]
		_, isLink := n.links[name]
		_, isFixed := n.fixed[name]
		if isFile || isDir || isLink || isFixed {
			return nil, "", fmt.Errorf("two entries at %q", p)
		}
		return n, name, nil
	}
	for p, target := range t.links {
		n, name, err := leaf(p)
		if err != nil {
			return digest.Digest{}, nil, err
		}
		n.links[name] = target
	}
	for p, d := range t.subtrees {
		n, name, err := leaf(p)
		if err != nil {
			return digest.Digest{}, nil, err
		}
		n.fixed[name] = d
	}
	blobs := map[digest.Digest][]byte{}
	var encode func(n *node) (digest.Digest, error)
	encode = func(n *node) (digest.Digest, error) {
		msg := &repb.Directory{}
		subs := map[string]digest.Digest{}
		for name, child := range n.dirs {
			d, err := encode(child)
			if err != nil {
				return digest.Digest{}, err
			}
			subs[name] = d
		}
		for name, d := range n.fixed {
			subs[name] = d
		}
		for _, name := range sortedKeys(subs) {
			msg.Directories = append(msg.Directories, &repb.DirectoryNode{Name: name, Digest: subs[name].Proto()})
		}
		for _, name := range sortedKeys(n.files) {
			f := n.files[name]
			msg.Files = append(msg.Files, &repb.FileNode{Name: name, Digest: f.d.Proto(), IsExecutable: f.exec})
		}
		for _, name := range sortedKeys(n.links) {
			msg.Symlinks = append(msg.Symlinks, &repb.SymlinkNode{Name: name, Target: n.links[name]})
		}
		d, b, err := digest.OfMessage(msg)
		if err != nil {
			return digest.Digest{}, err
		}
		blobs[d] = b
		return d, nil
	}
	d, err := encode(root)
	return d, blobs, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
