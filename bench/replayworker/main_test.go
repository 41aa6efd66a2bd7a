package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestInputRootStripsNestedWorkDir(t *testing.T) {
	for _, c := range []struct{ cwd, root, wd string }{
		{"/b/x/root", "/b/x/root", ""},
		{"/b/x/root/w", "/b/x/root", "w"},
		{"/b/x/root/w/w/w", "/b/x/root", "w/w/w"},
	} {
		if root, wd := inputRoot(c.cwd); root != c.root || wd != c.wd {
			t.Errorf("inputRoot(%q) = %q, %q; want %q, %q", c.cwd, root, wd, c.root, c.wd)
		}
	}
}

func TestListFilesDigestsEveryRegularFile(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"w/a.o": "module a", "w/.thindist/index.thinlto.bc": "shard", "w/sub/b.o": ""}
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "w", ".thindist", "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.o", filepath.Join(root, "w", "link.o")); err != nil {
		t.Fatal(err)
	}
	got, err := listFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for p, data := range files {
		h := sha256.Sum256([]byte(data))
		want[p] = digestKey(hex.EncodeToString(h[:]), int64(len(data)))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listFiles = %v, want %v", got, want)
	}
}

func TestOutputPaths(t *testing.T) {
	argv := []string{"/usr/bin/clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=.thindist/index.thinlto.bc", "-o", ".thindist/out/0.o"}
	if got := outputPaths(argv); !reflect.DeepEqual(got, []string{".thindist/out/0.o"}) {
		t.Fatalf("outputPaths = %q", got)
	}
}
