package reapi

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// rootFiles lists the files of ex's input root: root-relative path ->
// digest.
func rootFiles(t *testing.T, ex *Executable) map[string]digest.Digest {
	t.Helper()
	files := map[string]digest.Digest{}
	var walk func(dir string, pd *repb.Digest)
	walk = func(dir string, pd *repb.Digest) {
		d, err := digest.FromProto(pd)
		if err != nil {
			t.Fatal(err)
		}
		msg := &repb.Directory{}
		if err := proto.Unmarshal(ex.Blobs[d], msg); err != nil {
			t.Fatalf("directory %s: %v", dir, err)
		}
		for _, f := range msg.Files {
			fd, err := digest.FromProto(f.Digest)
			if err != nil {
				t.Fatal(err)
			}
			files[path.Join(dir, f.Name)] = fd
		}
		for _, sub := range msg.Directories {
			walk(path.Join(dir, sub.Name), sub.Digest)
		}
	}
	walk("", ex.Action.InputRootDigest)
	return files
}

// content returns the bytes of a file of ex's input root.
func content(t *testing.T, ex *Executable, d digest.Digest) []byte {
	t.Helper()
	if b, ok := ex.Blobs[d]; ok {
		return b
	}
	local, ok := ex.Files[d]
	if !ok {
		t.Fatalf("no content for %s", d)
	}
	b, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExecutableAbsolutePaths: a link with absolutely named objects and an
// absolute -o (so archive members are copied out to absolute paths) gives
// executable actions without absolute paths, whose shard names every
// module at the relative path where the input root holds that module's
// content, the primary module as the command names it; the cache key is
// the one of the same link with relative paths; and a copy of the project
// elsewhere gives the same executable action for every job whose shard
// names no archive member.
func TestExecutableAbsolutePaths(t *testing.T) {
	p := program(t, testprog.Options{Modules: 6, Seed: 5, ArchiveModules: 2})
	rel := capture(t, p, "prog")
	relObjects := p.Objects
	p.Objects = p.AbsObjects()
	for _, d := range []string{"out", "out2"} {
		if err := os.Mkdir(filepath.Join(p.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	abs := capture(t, p, filepath.Join(p.Dir, "out", "prog"))
	copyDir := filepath.Join(t.TempDir(), "elsewhere")
	if out, err := exec.Command("cp", "-a", p.Dir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	q := *p
	q.Dir = copyDir
	q.Objects = (&testprog.Program{Dir: copyDir, Objects: relObjects}).AbsObjects()
	other := capture(t, &q, filepath.Join(copyDir, "out2", "prog"))
	if len(rel) != len(abs) || len(abs) != len(other) {
		t.Fatalf("%d, %d and %d jobs", len(rel), len(abs), len(other))
	}

	o := ExecOptions{Files: digest.NewFiles(), Compiler: "/opt/clang/bin/clang"}
	k := newKeyer()
	// The relative link's key and import order of each job, by the
	// content of the module it compiles.
	type relJob struct {
		key   digest.Digest
		order string
	}
	relJobs := map[digest.Digest]relJob{}
	for _, a := range rel {
		relJobs[moduleDigest(t, a)] = relJob{key(t, k, a), importOrder(t, a)}
	}
	sameOrder, otherOrder := 0, 0
	byModule := map[digest.Digest]digest.Digest{} // primary module content -> action digest
	relocated, members, same := 0, 0, 0
	for _, a := range abs {
		ex, err := BuildExecutable(a, o)
		if err != nil {
			t.Fatalf("%s: %v", a.ID, err)
		}
		// The same key as the link with relative paths, unless the
		// modules it imports from sort in another order under their
		// absolute paths (which LLVM imports them in).
		r := relJobs[moduleDigest(t, a)]
		switch same := key(t, k, a) == r.key; {
		case r.order == importOrder(t, a):
			sameOrder++
			if !same {
				t.Errorf("%s: the key differs from the one of the link with relative paths", a.ID)
			}
		default:
			otherOrder++
			if same {
				t.Errorf("%s: the key is the one of the link with relative paths, where it imports in another order", a.ID)
			}
		}
		for _, arg := range ex.Command.Arguments[1:] {
			if strings.Contains(arg, "/") && strings.Contains(arg, p.Dir) {
				t.Errorf("%s: argument %q names this machine's tree", a.ID, arg)
			}
		}
		files := rootFiles(t, ex)
		wd := ex.Command.WorkingDirectory
		shard := content(t, ex, files[path.Join(wd, StableIndex)])
		mods, err := bitcode.ModuleTable(shard)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := os.ReadFile(a.Abs(a.Inputs[inputOf(a, action.RoleIndex)].Path))
		if err != nil {
			t.Fatal(err)
		}
		origMods, err := bitcode.ModuleTable(orig)
		if err != nil {
			t.Fatal(err)
		}
		primary := ""
		for i, arg := range a.Args {
			if arg.Kind == action.InputRef && a.Inputs[arg.Index].Role == action.RoleModule {
				primary = ex.Command.Arguments[i]
			}
		}
		found := false
		for i, m := range mods {
			if filepath.IsAbs(m.Path) {
				t.Errorf("%s: the shard names %q", a.ID, m.Path)
			}
			want, err := digest.OfFile(origMods[i].Path)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := files[path.Join(wd, m.Path)]; !ok || got != want {
				t.Errorf("%s: the root holds %v at %s, the shard's module %s is %v", a.ID, got, m.Path, origMods[i].Path, want)
			}
			found = found || m.Path == primary
			if strings.Contains(origMods[i].Path, "(") {
				members++
			}
			if strings.HasPrefix(m.Path, RelocatedDir+"/") {
				relocated++
			}
		}
		if !found {
			t.Errorf("%s: the command compiles %q, which the shard does not list", a.ID, primary)
		}
		// The worker imports in the order this machine would.
		paths := pathsOf(mods)
		slices.Sort(paths)
		var order []string
		for _, p := range paths {
			if p != primary {
				order = append(order, files[path.Join(wd, p)].HexHash())
			}
		}
		if got, want := strings.Join(order, " "), importOrder(t, a); got != want {
			t.Errorf("%s: the worker imports in the order\n %s\nthis machine in\n %s", a.ID, got, want)
		}
		mod, _ := digest.OfFile(a.Abs(a.Inputs[inputOf(a, action.RoleModule)].Path))
		if len(mods) == 1 || !strings.Contains(strings.Join(pathsOf(origMods), " "), "(") {
			byModule[mod] = ex.ActionDigest
		}
	}
	if relocated == 0 || members == 0 {
		t.Fatalf("%d modules relocated, %d archive members: the link does not exercise relocation", relocated, members)
	}
	for _, a := range other {
		mod, _ := digest.OfFile(a.Abs(a.Inputs[inputOf(a, action.RoleModule)].Path))
		want, ok := byModule[mod]
		if !ok {
			continue
		}
		ex, err := BuildExecutable(a, o)
		if err != nil {
			t.Fatal(err)
		}
		if ex.ActionDigest != want {
			t.Errorf("%s: the executable action differs in a copy of the project", a.ID)
		}
		same++
	}
	if same == 0 {
		t.Error("no job to compare across copies")
	}
	if sameOrder == 0 {
		t.Error("no job imports in the same order in both links: no key compared")
	}
	t.Logf("%d jobs (%d importing in the same order as with relative paths, %d not); %d module-table entries relocated, "+
		"%d of them archive members; %d executable actions compared across copies",
		len(abs), sameOrder, otherOrder, relocated, members, same)
}

// moduleDigest is the content digest of the module a compiles.
func moduleDigest(t *testing.T, a *action.Action) digest.Digest {
	t.Helper()
	d, err := digest.OfFile(a.Abs(a.Inputs[inputOf(a, action.RoleModule)].Local()))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// importOrder lists by content the modules a's shard names besides a's
// own, in the byte order of their paths: the order LLVM imports them in.
func importOrder(t *testing.T, a *action.Action) string {
	t.Helper()
	shard, err := os.ReadFile(a.Abs(a.Inputs[inputOf(a, action.RoleIndex)].Local()))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := bitcode.ModuleTable(shard)
	if err != nil {
		t.Fatal(err)
	}
	paths := pathsOf(mods)
	slices.Sort(paths)
	self := moduleDigest(t, a)
	var order []string
	for _, p := range paths {
		d, err := digest.OfFile(a.Abs(p))
		if err != nil {
			t.Fatal(err)
		}
		if d != self {
			order = append(order, d.HexHash())
		}
	}
	return strings.Join(order, " ")
}

func pathsOf(mods []bitcode.Module) []string {
	var s []string
	for _, m := range mods {
		s = append(s, m.Path)
	}
	return s
}
