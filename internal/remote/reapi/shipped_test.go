package reapi

import (
	"path/filepath"
	"slices"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/sys/digest"
)

// TestExecutableShipsToolchain: with a shipped toolchain the input root
// holds its subtree under its directory, the command starts with what the
// toolchain says, relative to the working directory, and the action's
// digest still does not depend on this machine's paths and PIDs.
func TestExecutableShipsToolchain(t *testing.T) {
	sub := NewTree()
	sub.AddFile("usr/bin/clang", digest.OfBytes([]byte("clang")), true)
	sub.AddSymlink("usr/bin/clang++", "clang")
	subRoot, subBlobs, err := sub.Build()
	if err != nil {
		t.Fatal(err)
	}
	var gotRoot string
	tc := &Shipped{Dir: ".tc", Root: subRoot, Blobs: subBlobs,
		Argv: func(root string) []string {
			gotRoot = root
			return []string{root + "/.tc/ld.so", root + "/.tc/usr/bin/clang"}
		}}
	var asked []string
	o := ExecOptions{Files: digest.NewFiles(), Toolchain: func(c string) *Shipped { asked = append(asked, c); return tc }}
	e1, err := BuildExecutable(backend(t, t.TempDir(), "1234"), o)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := BuildExecutable(backend(t, filepath.Join(t.TempDir(), "deeper"), "98765"), o)
	if err != nil {
		t.Fatal(err)
	}
	if e1.ActionDigest != e2.ActionDigest {
		t.Error("the executable action differs across PIDs and directories")
	}
	if !slices.Equal(asked, []string{"/usr/bin/clang", "/usr/bin/clang"}) || e1.Toolchain != tc {
		t.Errorf("toolchain asked for %q, executable's %v", asked, e1.Toolchain)
	}
	if gotRoot != ".." || e1.Command.WorkingDirectory != "w" {
		t.Errorf("the toolchain's paths are relative to %q from working directory %q", gotRoot, e1.Command.WorkingDirectory)
	}
	want := []string{"../.tc/ld.so", "../.tc/usr/bin/clang", "-c", "t1.o"}
	if !slices.Equal(e1.Command.Arguments[:4], want) {
		t.Errorf("arguments %q, want them to start %q", e1.Command.Arguments, want)
	}
	var root repb.Directory
	rootDigest, _ := digest.FromProto(e1.Action.InputRootDigest)
	if err := proto.Unmarshal(e1.Blobs[rootDigest], &root); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range root.Directories {
		if d.Name == ".tc" {
			found = d.Digest.Hash == subRoot.HexHash()
		}
	}
	if !found {
		t.Errorf("the input root %v has no .tc holding the toolchain %s", root.Directories, subRoot)
	}
	for d := range subBlobs {
		if _, ok := e1.Blobs[d]; ok {
			t.Errorf("the toolchain's message %s is among the action's own blobs", d)
		}
	}
	var subDir repb.Directory
	proto.Unmarshal(subBlobs[subRoot], &subDir)
	usr := subDir.Directories[0]
	var bin repb.Directory
	d, _ := digest.FromProto(usr.Digest)
	proto.Unmarshal(subBlobs[d], &bin)
	d, _ = digest.FromProto(bin.Directories[0].Digest)
	proto.Unmarshal(subBlobs[d], &bin)
	if len(bin.Files) != 1 || !bin.Files[0].IsExecutable || len(bin.Symlinks) != 1 || bin.Symlinks[0].Target != "clang" {
		t.Errorf("usr/bin: %v", &bin)
	}
}

func TestTreeEntriesClash(t *testing.T) {
	tr := NewTree()
	tr.AddFile("a/b", digest.OfBytes(nil), false)
	tr.AddSymlink("a/b", "x")
	if _, _, err := tr.Build(); err == nil {
		t.Error("a file and a link at one path")
	}
	tr = NewTree()
	tr.AddFile("a/b", digest.OfBytes(nil), false)
	tr.AddSubtree("a", digest.OfBytes(nil))
	if _, _, err := tr.Build(); err == nil {
		t.Error("a directory and a subtree at one path")
	}
	if err := NewTree().AddSubtree("../x", digest.OfBytes(nil)); err == nil {
		t.Error("a subtree outside the root")
	}
}

// TestShippedFilesAtRoot: a shipped toolchain's AtRoot files (the env a
// chrooting runner starts commands through) sit at their paths of the
// input root, beside the action's inputs, in every action.
func TestShippedFilesAtRoot(t *testing.T) {
	sub := NewTree()
	sub.AddFile("usr/bin/clang", digest.OfBytes([]byte("clang")), true)
	subRoot, subBlobs, err := sub.Build()
	if err != nil {
		t.Fatal(err)
	}
	env := digest.OfBytes([]byte("env"))
	tc := &Shipped{Dir: ".tc", Root: subRoot, Blobs: subBlobs,
		Argv:   func(root string) []string { return []string{root + "/.tc/usr/bin/clang"} },
		AtRoot: []RootFile{{Path: "usr/bin/env", Digest: env, Executable: true}}}
	e, err := BuildExecutable(backend(t, t.TempDir(), "1234"), ExecOptions{Files: digest.NewFiles(), Toolchain: func(string) *Shipped { return tc }})
	if err != nil {
		t.Fatal(err)
	}
	dir := func(d digest.Digest, name string) digest.Digest {
		var m repb.Directory
		if err := proto.Unmarshal(e.Blobs[d], &m); err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Directories {
			if s.Name == name {
				d, _ := digest.FromProto(s.Digest)
				return d
			}
		}
		t.Fatalf("no %s in %v", name, &m)
		return d
	}
	root, _ := digest.FromProto(e.Action.InputRootDigest)
	var bin repb.Directory
	proto.Unmarshal(e.Blobs[dir(dir(root, "usr"), "bin")], &bin)
	if len(bin.Files) != 1 || bin.Files[0].Name != "env" || bin.Files[0].Digest.Hash != env.HexHash() || !bin.Files[0].IsExecutable {
		t.Errorf("usr/bin of the input root: %v, want the executable env", &bin)
	}
}
