package reapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var llvmBin = testprog.LLVMBin()

func needClang(t *testing.T) string {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang", "ld.lld")
	return filepath.Join(llvmBin, "clang")
}

// program generates and compiles a program.
func program(t *testing.T, o testprog.Options) *testprog.Program {
	t.Helper()
	clang := needClang(t)
	p, err := testprog.Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Compile(context.Background(), clang); err != nil {
		t.Fatal(err)
	}
	return p
}

// capture runs lld on p up to its job file and returns the parsed actions,
// with every shard and member copy in place.
func capture(t *testing.T, p *testprog.Program, out string, extra ...string) []*action.Action {
	t.Helper()
	return captureWith(t, p, filepath.Join(llvmBin, "clang"), out, extra...)
}

// captureWith is capture through the clang driver clang.
func captureWith(t *testing.T, p *testprog.Program, clang, out string, extra ...string) []*action.Action {
	t.Helper()
	actions, err := p.CaptureActions(context.Background(), clang, out, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

func newKeyer() *Keyer {
	return &Keyer{
		Files:      digest.NewFiles(),
		CompilerID: func(string) (string, error) { return "sha256:test-compiler", nil },
		Getenv:     func(string) string { return "" },
	}
}

func key(t *testing.T, k *Keyer, a *action.Action) digest.Digest {
	t.Helper()
	d, err := k.Key(a)
	if err != nil {
		t.Fatalf("key of %s: %v", a.ID, err)
	}
	return d
}

func inputOf(a *action.Action, r action.Role) int {
	for i, in := range a.Inputs {
		if in.Role == r {
			return i
		}
	}
	return -1
}

// clone copies an action deeply enough to change its inputs and args.
func clone(a *action.Action) *action.Action {
	b := *a
	b.Inputs = append([]action.Input(nil), a.Inputs...)
	b.Args = append([]action.Arg(nil), a.Args...)
	b.Outputs = append([]action.Output(nil), a.Outputs...)
	return &b
}

// TestKeyPrimaryModule: two jobs that differ only in which module is the
// primary one (same shard, same files) compile different modules and must
// never share a key, whether the other module is in the shard's table (an
// import) or not.
func TestKeyPrimaryModule(t *testing.T) {
	p := program(t, testprog.Options{Modules: 5, Seed: 1, ArchiveModules: 1})
	acts := capture(t, p, "prog")
	k := newKeyer()
	seen := map[digest.Digest]string{}
	swapped := 0
	for _, a := range acts {
		base := key(t, k, a)
		if other, dup := seen[base]; dup {
			t.Errorf("jobs %s and %s share a key", a.ID, other)
		}
		seen[base] = a.ID
		mod := inputOf(a, action.RoleModule)
		for i, in := range a.Inputs {
			if in.Role != action.RoleImport {
				continue
			}
			// The same job with an import as the primary module.
			b := clone(a)
			b.Inputs[mod], b.Inputs[i] = a.Inputs[i], a.Inputs[mod]
			b.Inputs[mod].Role, b.Inputs[i].Role = action.RoleModule, action.RoleImport
			if kb := key(t, k, b); kb == base {
				t.Errorf("job %s keyed like the same job compiling %s instead", a.ID, in.Path)
			}
			swapped++
		}
		// A primary module the shard does not list at all.
		c := clone(a)
		c.Inputs[mod].Path = filepath.Join(p.Dir, "m0.o")
		if c.Inputs[mod].Path == a.Abs(a.Inputs[mod].Path) {
			c.Inputs[mod].Path = filepath.Join(p.Dir, "main.o")
		}
		if kc := key(t, k, c); kc == base {
			t.Errorf("job %s keyed like the same job compiling %s", a.ID, c.Inputs[mod].Path)
		}
	}
	if swapped == 0 {
		t.Fatal("no job imports anything: the program does not exercise the swap")
	}
}

// TestKeyRepeats: two captures of the same link (two lld processes, two
// PIDs; the second, where possible, in a PID namespace so that the PID has
// another number of hex digits) give the same key for every job, archive
// members included, and the key follows what the backend reads: the
// content of an imported module, an argument, the compiler, the
// environment that changes clang.
func TestKeyRepeats(t *testing.T) {
	p := program(t, testprog.Options{Modules: 7, Seed: 2, ArchiveModules: 2, ThinArchiveModules: 2})
	first := capture(t, p, "prog")
	second := capture(t, p, "prog")
	if u, err := exec.LookPath("unshare"); err == nil && exec.Command(u, "--pid", "--fork", "true").Run() == nil {
		// CaptureJobFile has no prefix option: run clang through a
		// wrapper that enters a PID namespace.
		wrap := filepath.Join(t.TempDir(), "clang")
		os.WriteFile(wrap, []byte("#!/bin/sh\nexec unshare --pid --fork "+filepath.Join(llvmBin, "clang")+" \"$@\"\n"), 0o755)
		second = captureWith(t, p, wrap, "prog")
	}
	if len(first) != len(second) {
		t.Fatalf("%d vs %d jobs", len(first), len(second))
	}
	k1, k2 := newKeyer(), newKeyer()
	for i := range first {
		if a, b := key(t, k1, first[i]), key(t, k2, second[i]); a != b {
			d1, _ := k1.Describe(first[i])
			d2, _ := k2.Describe(second[i])
			t.Errorf("job %s / %s: keys differ between two links:\n%s\n%s", first[i].ID, second[i].ID, d1, d2)
		}
	}

	// Sensitivity, on the job that imports the most.
	a := first[0]
	for _, b := range first {
		if len(b.Inputs) > len(a.Inputs) {
			a = b
		}
	}
	base := key(t, newKeyer(), a)
	imp := -1
	for i, in := range a.Inputs {
		if in.Role == action.RoleImport {
			imp = i
		}
	}
	if imp < 0 {
		t.Fatal("no job imports")
	}
	// Another imported module: same path, other content.
	path := a.Abs(a.Inputs[imp].Local())
	orig, _ := os.ReadFile(path)
	os.WriteFile(path, append(append([]byte{}, orig...), 0), 0o644)
	if key(t, newKeyer(), a) == base {
		t.Errorf("the key ignores the content of imported module %s", a.Inputs[imp].Path)
	}
	os.Remove(path)
	if key(t, newKeyer(), a) == base {
		t.Errorf("the key ignores that imported module %s is missing", a.Inputs[imp].Path)
	}
	os.WriteFile(path, orig, 0o644)
	if key(t, newKeyer(), a) != base {
		t.Fatal("the key does not come back with the original content")
	}
	// An argument.
	b := clone(a)
	b.Args = append(b.Args[:1:1], append([]action.Arg{action.Lit("-O1")}, a.Args[1:]...)...)
	if key(t, newKeyer(), b) == base {
		t.Error("the key ignores an added argument")
	}
	// The compiler.
	kc := newKeyer()
	kc.CompilerID = func(string) (string, error) { return "sha256:other", nil }
	if key(t, kc, a) == base {
		t.Error("the key ignores the compiler's identity")
	}
	// The compiler's path is not part of it, its identity is.
	c := clone(a)
	c.Args[0] = action.Lit("/elsewhere/bin/" + filepath.Base(a.Args[0].Text))
	if key(t, newKeyer(), c) != base {
		t.Error("the key depends on the compiler's directory")
	}
	// Environment that changes clang.
	ke := newKeyer()
	ke.Getenv = func(n string) string {
		if n == "CCC_OVERRIDE_OPTIONS" {
			return "+-O0"
		}
		return ""
	}
	if key(t, ke, a) == base {
		t.Error("the key ignores CCC_OVERRIDE_OPTIONS")
	}
}

// TestKeyOncePerAction: the local and the remote cache both ask for an
// action's key; the second time it comes from the first (the shard is not
// read again, the record hears of it once).
func TestKeyOncePerAction(t *testing.T) {
	p := program(t, testprog.Options{Modules: 3, Seed: 5})
	a := capture(t, p, "prog")[0]
	k := newKeyer()
	observed := 0
	k.Observe = func(*action.Action, digest.Digest, *Parts) { observed++ }
	first := key(t, k, a)
	for _, in := range a.Inputs {
		if in.Role == action.RoleIndex {
			if err := os.Remove(a.Abs(in.Local())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if again := key(t, k, a); again != first || observed != 1 {
		t.Errorf("second key %v (first %v), observed %d times", again, first, observed)
	}
	if _, err := newKeyer().Key(a); err == nil {
		t.Error("a fresh Keyer computed a key without the shard: the test tests nothing")
	}
}

// TestKeyShard: the first key of an action hands back the shard it was
// made from, byte for byte; a memoised one hands back none.
func TestKeyShard(t *testing.T) {
	p := program(t, testprog.Options{Modules: 3, Seed: 5})
	a := capture(t, p, "prog")[0]
	want, err := os.ReadFile(a.Abs(a.Inputs[inputOf(a, action.RoleIndex)].Local()))
	if err != nil {
		t.Fatal(err)
	}
	k := newKeyer()
	d, shard, err := k.KeyShard(a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shard, want) {
		t.Errorf("KeyShard handed back %d bytes, want the shard's %d", len(shard), len(want))
	}
	if d2, again, err := k.KeyShard(a); err != nil || d2 != d || again != nil {
		t.Errorf("memoised KeyShard: %v, %d bytes, %v; want %v, none", d2, len(again), err, d)
	}
}

// TestKeyMessages: with KeepMessages the Keyer hands out, once, the Action
// whose digest is the key and the Command that Action names, as encoded
// for the key; without it, nothing is kept.
func TestKeyMessages(t *testing.T) {
	p := program(t, testprog.Options{Modules: 3, Seed: 5})
	a := capture(t, p, "prog")[0]
	k := newKeyer()
	k.KeepMessages = true
	d := key(t, k, a)
	msgs, ok := k.Messages(a)
	if !ok || len(msgs) != 2 {
		t.Fatalf("Messages: %d blobs, %v; want the Action and the Command", len(msgs), ok)
	}
	for md, b := range msgs {
		if digest.OfBytes(b) != md {
			t.Errorf("blob %s does not have its digest", md)
		}
	}
	var act repb.Action
	if err := proto.Unmarshal(msgs[d], &act); err != nil {
		t.Fatalf("the key's blob is not an Action: %v", err)
	}
	cd, err := digest.FromProto(act.CommandDigest)
	if err != nil {
		t.Fatal(err)
	}
	var cmd repb.Command
	if err := proto.Unmarshal(msgs[cd], &cmd); err != nil || len(cmd.Arguments) == 0 {
		t.Fatalf("the Action's command %s: %v, %v", cd, cmd.Arguments, err)
	}
	if _, ok := k.Messages(a); ok {
		t.Errorf("Messages handed the same messages out twice")
	}
	if key(t, k, a) != d {
		t.Errorf("the key changed once the messages were taken")
	}
	plain := newKeyer()
	key(t, plain, a)
	if _, ok := plain.Messages(a); ok {
		t.Errorf("messages kept without KeepMessages")
	}
}

// TestKeyXIRNoOp: `thindist link` writes "-x ir" before the module and lld's
// DTLTO does not; for a module clang reads as bitcode anyway (an object's
// name) both commands compile the same and must share a key, while before a
// module named like a source file (which clang refuses without it) the flag
// changes the compile and the key.
func TestKeyXIRNoOp(t *testing.T) {
	p := program(t, testprog.Options{Modules: 3, Seed: 4, ArchiveModules: 1})
	acts := capture(t, p, "prog")
	k := newKeyer()
	withXIR := func(a *action.Action) *action.Action {
		b := clone(a)
		for i, arg := range b.Args {
			if arg.Kind == action.InputRef && arg.Text == "" && b.Inputs[arg.Index].Role == action.RoleModule {
				b.Args = append(b.Args[:i:i], append([]action.Arg{action.Lit("-x"), action.Lit("ir")}, a.Args[i:]...)...)
				return b
			}
		}
		t.Fatalf("%s: no module argument in %q", a.ID, a.Command())
		return nil
	}
	for _, a := range acts {
		if ka, kx := key(t, k, a), key(t, k, withXIR(a)); ka != kx {
			t.Errorf("%s: -x ir before %s changed the key", a.ID, a.Inputs[inputOf(a, action.RoleModule)].Path)
		}
		// The same module under a source file's name.
		c := clone(a)
		mod := inputOf(c, action.RoleModule)
		data, err := os.ReadFile(a.Abs(a.Inputs[mod].Local()))
		if err != nil {
			t.Fatal(err)
		}
		c.Inputs[mod].Path = a.Abs(a.Inputs[mod].Local()) + ".c"
		if err := os.WriteFile(c.Inputs[mod].Path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if kc, kx := key(t, k, c), key(t, k, withXIR(c)); kc == kx {
			t.Errorf("%s: -x ir before a module named %s left the key as it was", a.ID, c.Inputs[mod].Path)
		}
	}
}

// TestKeyImportOrder: LLVM imports from a module's sources in the byte
// order of their paths, and the object shows that order, so the key must
// too. The job that imports the most is keyed again with every module of
// its shard renamed (the inputs read from the same files): names that sort
// as before keep the key; two imports whose names swap places change it.
func TestKeyImportOrder(t *testing.T) {
	p := program(t, testprog.Options{Modules: 7, Seed: 2, ArchiveModules: 2, ThinArchiveModules: 2})
	a := capture(t, p, "prog")[0]
	for _, b := range capture(t, p, "prog") {
		if len(b.Inputs) > len(a.Inputs) {
			a = b
		}
	}
	shardIdx := inputOf(a, action.RoleIndex)
	shard, err := os.ReadFile(a.Abs(a.Inputs[shardIdx].Local()))
	if err != nil {
		t.Fatal(err)
	}
	table, err := bitcode.ModuleTable(shard)
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, len(table))
	for i, m := range table {
		paths[i] = m.Path
	}
	slices.Sort(paths)
	rank := map[string]int{}
	for i, p := range paths {
		rank[p] = i
	}
	self := a.Inputs[inputOf(a, action.RoleModule)].Path
	var imports []string
	for _, p := range paths {
		if p != self {
			imports = append(imports, p)
		}
	}
	if len(imports) < 2 {
		t.Fatalf("job %s imports from %d modules; the order needs two", a.ID, len(imports))
	}
	// renamed keys a with every module of its shard named "o/<rank>.o",
	// the ranks of x and y exchanged.
	renamed := func(x, y string) digest.Digest {
		t.Helper()
		name := func(p string) string {
			r := rank[p]
			switch p {
			case x:
				r = rank[y]
			case y:
				r = rank[x]
			}
			return fmt.Sprintf("o/%02d.o", r)
		}
		data, err := bitcode.RewriteModulePaths(shard, func(m bitcode.Module) string { return name(m.Path) })
		if err != nil {
			t.Fatal(err)
		}
		b := clone(a)
		b.Inputs[shardIdx] = action.Input{Path: filepath.Join(t.TempDir(), "shard.thinlto.bc"), Role: action.RoleIndex}
		os.WriteFile(b.Inputs[shardIdx].Path, data, 0o644)
		for i, in := range b.Inputs {
			if _, ok := rank[in.Path]; ok {
				b.Inputs[i] = action.Input{Path: name(in.Path), Source: a.Abs(in.Local()), Role: in.Role}
			}
		}
		return key(t, newKeyer(), b)
	}
	base := key(t, newKeyer(), a)
	if renamed("", "") != base {
		t.Errorf("job %s: modules renamed in the same order changed the key", a.ID)
	}
	if renamed(imports[0], imports[len(imports)-1]) == base {
		t.Errorf("job %s: the key stays when %s and %s swap places in the import order", a.ID, imports[0], imports[len(imports)-1])
	}
}
