package reapi

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/digest"
)

// backend builds an action like lld's: module, PID-bearing shard and
// output, one import through "..".
func backend(t *testing.T, dir, pid string) *action.Action {
	t.Helper()
	for name, content := range map[string]string{
		"src/t1.o": "module one", "lib/t2.o": "module two", "src/t1.o." + pid + ".thinlto.bc": "shard",
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := &action.Action{
		ID:  "t1.o",
		Dir: filepath.Join(dir, "src"),
		Inputs: []action.Input{
			{Path: "t1.o", Role: action.RoleModule},
			{Path: "t1.o." + pid + ".thinlto.bc", Role: action.RoleIndex},
			{Path: "../lib/t2.o", Role: action.RoleImport},
		},
		Outputs: []action.Output{{Path: filepath.Join(dir, "src", "t1."+pid+".native.o")}},
	}
	a.Args = []action.Arg{action.Lit("/usr/bin/clang"), action.Lit("-c"), action.In("", 0),
		action.In("-fthinlto-index=", 1), action.Lit("-o"), action.Out("", 0)}
	return a
}

func TestExecutableStable(t *testing.T) {
	o := ExecOptions{Files: digest.NewFiles(), Compiler: "/opt/clang/bin/clang", Platform: Platform([][2]string{{"OSFamily", "Linux"}})}
	e1, err := BuildExecutable(backend(t, t.TempDir(), "1234"), o)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := BuildExecutable(backend(t, filepath.Join(t.TempDir(), "deeper", "checkout"), "98765"), o)
	if err != nil {
		t.Fatal(err)
	}
	if e1.ActionDigest != e2.ActionDigest {
		t.Errorf("the executable action differs across PIDs and directories:\n%v\n%v", e1.Command, e2.Command)
	}
	want := []string{"/opt/clang/bin/clang", "-c", "t1.o", "-fthinlto-index=.thindist/index.thinlto.bc", "-o", ".thindist/out/0.o"}
	if !slices.Equal(e1.Command.Arguments, want) {
		t.Errorf("arguments %q, want %q", e1.Command.Arguments, want)
	}
	if e1.Command.WorkingDirectory != "w" || !slices.Equal(e1.Outputs, []string{".thindist/out/0.o"}) {
		t.Errorf("working directory %q, outputs %q", e1.Command.WorkingDirectory, e1.Outputs)
	}
	if n := len(e1.Files); n != 2 {
		t.Errorf("%d input files, want 2 (the module and its import)", n)
	}
	if shard, ok := e1.Blobs[digest.OfBytes([]byte("shard"))]; !ok || string(shard) != "shard" {
		t.Errorf("the shard is not among the blobs, read once (%q)", shard)
	}
	o.Platform = Platform([][2]string{{"OSFamily", "Windows"}})
	e3, _ := BuildExecutable(backend(t, t.TempDir(), "1"), o)
	if e3.ActionDigest == e1.ActionDigest {
		t.Errorf("the platform is not part of the action")
	}
}

func TestExecutableAbsoluteShard(t *testing.T) {
	// An absolute shard path is fine: the shard gets a stable name.
	a := backend(t, t.TempDir(), "1")
	a.Inputs[1].Path = filepath.Join(a.Dir, a.Inputs[1].Path)
	if _, err := BuildExecutable(a, ExecOptions{Files: digest.NewFiles()}); err != nil {
		t.Errorf("absolute shard: %v", err)
	}
}

func TestCheckOutputPath(t *testing.T) {
	for _, p := range []string{"../x", "/abs", "a/../../x", "..", "", "./a"} {
		if CheckOutputPath(p) == nil {
			t.Errorf("%q accepted", p)
		}
	}
	if err := CheckOutputPath(".thindist/out/0.o"); err != nil {
		t.Error(err)
	}
}

// TestExecutableSharedShard: given the shard as read for the key
// (ExecOptions.Shard), the remote action is built from those bytes and the
// shard's file is not read again.
func TestExecutableSharedShard(t *testing.T) {
	a := backend(t, t.TempDir(), "1234")
	if err := os.Remove(a.Abs(a.Inputs[1].Path)); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildExecutable(a, ExecOptions{Files: digest.NewFiles()}); err == nil {
		t.Fatal("built without the shard's file or bytes: the test tests nothing")
	}
	ex, err := BuildExecutable(a, ExecOptions{Files: digest.NewFiles(), Shard: []byte("shard as keyed")})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := ex.Blobs[digest.OfBytes([]byte("shard as keyed"))]; !ok || string(b) != "shard as keyed" {
		t.Errorf("the shard sent is not the one given (%q)", b)
	}
}
