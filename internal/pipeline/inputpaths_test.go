package pipeline

import (
	"slices"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestInputPathsSkipShards: the digests hashed ahead are those of the
// modules, imports and common inputs, each once and in the actions' order;
// no index shard is read for a digest nothing asks for.
func TestInputPathsSkipShards(t *testing.T) {
	a := &action.Action{ID: "a.o", Dir: "/b", Inputs: []action.Input{
		{Path: "a.o", Role: action.RoleModule},
		{Path: "a.o.thinlto.bc", Role: action.RoleIndex},
		{Path: "c.o", Role: action.RoleImport},
		{Path: "/p/prof.profdata", Role: action.RoleCommon},
	}}
	b := &action.Action{ID: "c.o", Dir: "/b", Inputs: []action.Input{
		{Path: "c.o", Role: action.RoleModule},
		{Path: "c.o.thinlto.bc", Role: action.RoleIndex},
		{Path: "../b/a.o", Role: action.RoleImport},
		{Path: "/p/prof.profdata", Role: action.RoleCommon},
		{Path: "lib.a(m.o at 12).o", Source: "/b/out.lto.m.o", Role: action.RoleImport},
	}}
	got := inputPaths([]*action.Action{a, b})
	want := []string{"/b/a.o", "/b/c.o", "/p/prof.profdata", "/b/out.lto.m.o"}
	if !slices.Equal(got, want) {
		t.Errorf("inputPaths = %q, want %q", got, want)
	}
}
