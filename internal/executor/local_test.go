package executor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestLocalNeverWritesThroughALink: a compiler that writes its output in
// place (a wrapper's `> out`) into a path an earlier attempt left as a hard
// link into the cache must not change the cached file.
func TestLocalNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	blob := filepath.Join(dir, "blob")
	if err := os.WriteFile(blob, []byte("cached\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.o")
	if err := os.Link(blob, out); err != nil {
		t.Fatal(err)
	}
	os.Chmod(blob, 0o644) // writable, as a careless writer would find it
	a := &action.Action{ID: "m.o", Dir: dir,
		Args: []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit(`echo fresh > "$0"`), action.Out("", 0)}}
	res, err := NewLocal(LocalOptions{}).Execute(t.Context(), Job{Action: a, Out: []string{out}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if got, _ := os.ReadFile(out); string(got) != "fresh\n" {
		t.Errorf("the output holds %q", got)
	}
	if got, _ := os.ReadFile(blob); string(got) != "cached\n" {
		t.Errorf("the compiler wrote through the hard link: the cached file holds %q", got)
	}
}
