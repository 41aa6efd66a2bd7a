package reapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/plainfile"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// shardOf reads a's index shard.
func shardOf(t *testing.T, a *action.Action) []byte {
	t.Helper()
	for _, in := range a.Inputs {
		if in.Role == action.RoleIndex {
			b, err := plainfile.ReadFile(a.Abs(in.Local()))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("%s has no index shard", a.ID)
	return nil
}

// TestShardMemoKeys: keys made through a memo, empty or loaded from an
// earlier run's, are the keys made without one; and a loaded memo holds
// every shard the earlier run decoded.
func TestShardMemoKeys(t *testing.T) {
	actions := capture(t, program(t, testprog.Options{Modules: 4, Seed: 3}), "app")
	path := filepath.Join(t.TempDir(), "shards")
	want := map[*action.Action]string{}
	for _, a := range actions {
		want[a] = key(t, newKeyer(), a).String()
	}
	for run := 0; run < 2; run++ {
		memo := LoadShardMemo(path, "thindist 1")
		if run == 1 && len(memo.old) != len(actions) {
			t.Errorf("the second run loaded %d shards, want %d", len(memo.old), len(actions))
		}
		k := newKeyer()
		k.Shards = memo
		for _, a := range actions {
			if got := key(t, k, a).String(); got != want[a] {
				t.Errorf("run %d: %s keyed %s through the memo, %s without", run, a.ID, got, want[a])
			}
		}
		if run == 1 && len(memo.added) != 0 {
			t.Errorf("the second run decoded %d shards again", len(memo.added))
		}
		if err := memo.Save(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShardMemoServes: a loaded memo answers for a shard it holds without
// decoding it, for its own executable only; a damaged file is an empty
// memo.
func TestShardMemoServes(t *testing.T) {
	actions := capture(t, program(t, testprog.Options{Modules: 2, Seed: 5}), "app")
	shard := shardOf(t, actions[0])
	table, norm, err := bitcode.TableAndDigest(shard)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shards")
	m := LoadShardMemo(path, "thindist 1")
	if _, _, err := m.tableAndDigest(shard); err != nil {
		t.Fatal(err)
	}
	// What the memo says of the shard, told apart from a decode.
	for h, e := range m.added {
		e.norm[0] ^= 0xff
		e.table = append([]bitcode.Module{{ID: 99, Path: "marker", Hash: [5]uint32{1, 2, 3, 4, 5}}}, e.table...)
		m.added[h] = e
	}
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	gotTable, gotNorm, err := LoadShardMemo(path, "thindist 1").tableAndDigest(shard)
	if err != nil {
		t.Fatal(err)
	}
	if gotNorm == norm || len(gotTable) != len(table)+1 || gotTable[0] != (bitcode.Module{ID: 99, Path: "marker", Hash: [5]uint32{1, 2, 3, 4, 5}}) || gotTable[1] != table[0] {
		t.Errorf("the loaded memo did not serve the shard from its entry: %v", gotTable)
	}
	// Another executable's memo, or a damaged one: decoded.
	if _, gotNorm, _ := LoadShardMemo(path, "thindist 2").tableAndDigest(shard); gotNorm != norm {
		t.Error("another executable's memo served the shard")
	}
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 1
	os.WriteFile(path, data, 0o644)
	if _, gotNorm, _ := LoadShardMemo(path, "thindist 1").tableAndDigest(shard); gotNorm != norm {
		t.Error("a damaged memo served the shard")
	}
	// No identity: nothing remembered.
	none := LoadShardMemo(path, "")
	none.tableAndDigest(shard)
	if err := none.Save(); err != nil || len(none.added) != 0 {
		t.Errorf("a memo without identity remembered %d shards (%v)", len(none.added), err)
	}
}
