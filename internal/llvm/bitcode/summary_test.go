package bitcode

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// realShards links a generated program up to its job file and returns its
// index shards.
func realShards(t *testing.T) [][]byte {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang", "ld.lld")
	clang := filepath.Join(llvmBin, "clang")
	p, err := testprog.Generate(t.TempDir(), testprog.Options{Modules: 6, Seed: 9, ArchiveModules: 2, CXX: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Compile(ctx, clang+"++"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CaptureJobFile(ctx, clang+"++", "prog"); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(p.Dir, "*.thinlto.bc"))
	if len(files) != 6 {
		t.Fatalf("%d shards", len(files))
	}
	var shards [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, b)
	}
	return shards
}

// summaryEvents returns the events inside the shard's summary block.
func summaryEvents(t *testing.T, shard []byte) []heldEvent {
	t.Helper()
	c, err := unwrap(shard)
	if err != nil {
		t.Fatal(err)
	}
	var evs []heldEvent
	in := false
	_, err = walk(c, func(ev *event) error {
		switch {
		case ev.kind == evEnter && ev.blockID == globalValSummaryBlockID:
			in = true
		case ev.kind == evExit && ev.blockID == globalValSummaryBlockID:
			in = false
		case in:
			evs = append(evs, hold(ev))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func cloneEvents(evs []heldEvent) []heldEvent {
	out := make([]heldEvent, len(evs))
	for i, ev := range evs {
		out[i] = ev
		out[i].ops = append([]uint64(nil), ev.ops...)
	}
	return out
}

// idPositions lists the operand positions of a record that hold value ids
// (the layouts canonicalSummary relies on).
func idPositions(ev heldEvent) []int {
	var pos []int
	switch ev.code {
	case fsValueGUID:
		pos = []int{0}
	case fsCombinedProfile:
		n := int(ev.ops[6])
		pos = append(pos, 0)
		for i := 9; i < 9+n; i++ {
			pos = append(pos, i)
		}
		for i := 9 + n; i < len(ev.ops); i += 2 {
			pos = append(pos, i)
		}
	case fsCombinedGlobalVarRefs:
		pos = append(pos, 0)
		for i := 4; i < len(ev.ops); i++ {
			pos = append(pos, i)
		}
	case fsCombinedAlias:
		pos = []int{0}
		if ev.ops[3] != 0 {
			pos = append(pos, 3)
		}
	}
	return pos
}

// renumber gives every value id another number (a random permutation)
// and shuffles the order of the function and variable summaries of
// distinct GUIDs, as another link's numbering would.
func renumber(evs []heldEvent, mods map[uint64][]byte, rng *rand.Rand) ([]heldEvent, map[uint64][]byte) {
	evs = cloneEvents(evs)
	// Module ids too, as a table in another order would number them.
	var modIDs []uint64
	for id := range mods {
		modIDs = append(modIDs, id)
	}
	sort.Slice(modIDs, func(i, j int) bool { return modIDs[i] < modIDs[j] })
	mperm := rng.Perm(len(modIDs))
	modTo := map[uint64]uint64{}
	newMods := map[uint64][]byte{}
	for i, id := range modIDs {
		modTo[id] = modIDs[mperm[i]]
		newMods[modIDs[mperm[i]]] = mods[id]
	}
	for i := range evs {
		if c := evs[i].code; evs[i].kind == evRecord && (c == fsCombinedProfile || c == fsCombinedGlobalVarRefs || c == fsCombinedAlias) {
			evs[i].ops[1] = modTo[evs[i].ops[1]]
		}
	}
	var ids []uint64
	for _, ev := range evs {
		if ev.kind == evRecord && ev.code == fsValueGUID {
			ids = append(ids, ev.ops[0])
		}
	}
	perm := rng.Perm(len(ids))
	to := map[uint64]uint64{}
	for i, id := range ids {
		to[id] = ids[perm[i]]
	}
	first, last := -1, -1
	for i := range evs {
		if evs[i].kind != evRecord {
			continue
		}
		for _, p := range idPositions(evs[i]) {
			evs[i].ops[p] = to[evs[i].ops[p]]
		}
		if c := evs[i].code; c == fsCombinedProfile || c == fsCombinedGlobalVarRefs {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first >= 0 {
		// Reorder by a random rank per GUID, keeping the order of the
		// summaries of one GUID (which the reader keeps too). Type
		// metadata records go with the function summary after them, as
		// the writer puts them.
		guidOf := map[uint64]uint64{}
		for _, ev := range evs {
			if ev.kind == evRecord && ev.code == fsValueGUID {
				guidOf[ev.ops[0]] = ev.ops[1]<<32 | ev.ops[2]
			}
		}
		for first > 0 && isTypeMetadata(evs[first-1]) {
			first--
		}
		var groups [][]heldEvent
		var cur []heldEvent
		for _, ev := range evs[first : last+1] {
			cur = append(cur, ev)
			if !isTypeMetadata(ev) {
				groups = append(groups, cur)
				cur = nil
			}
		}
		rank := map[uint64]int{}
		key := func(g []heldEvent) uint64 { return guidOf[g[len(g)-1].ops[0]] }
		for _, g := range groups {
			if _, ok := rank[key(g)]; !ok {
				rank[key(g)] = rng.Int()
			}
		}
		sort.SliceStable(groups, func(i, j int) bool { return rank[key(groups[i])] < rank[key(groups[j])] })
		units := evs[first:first]
		for _, g := range groups {
			units = append(units, g...)
		}
	}
	return evs, newMods
}

func isTypeMetadata(ev heldEvent) bool {
	return ev.kind == evRecord && isTypeMetadataCode(ev.code)
}

// summaryOf returns the shard's summary block events and its module ids'
// identities, as NormalizedDigest gives them to canonicalSummary.
func summaryOf(t *testing.T, shard []byte) ([]heldEvent, map[uint64][]byte) {
	t.Helper()
	table, err := ModuleTable(shard)
	if err != nil {
		t.Fatal(err)
	}
	count := map[[5]uint32]int{}
	for _, m := range table {
		count[m.Hash]++
	}
	mods, ok := moduleIdents(table, count)
	if !ok {
		t.Fatal("module identities repeat")
	}
	return summaryEvents(t, shard), mods
}

func mustCanon(t *testing.T, evs []heldEvent, mods map[uint64][]byte) []byte {
	t.Helper()
	out, ok := canonicalSummary(evs, mods)
	if !ok {
		t.Fatal("a summary block as LLVM 22 writes it was not canonicalised")
	}
	return out
}

// TestCanonicalSummaryReal: the summary blocks of real LLVM 22 shards are
// canonicalised; renumbering their value ids and reordering their
// summaries changes nothing; any change of meaning changes the rendering.
func TestCanonicalSummaryReal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	tested := 0
	for _, shard := range realShards(t) {
		evs, mods := summaryOf(t, shard)
		base := mustCanon(t, evs, mods)
		for i := 0; i < 5; i++ {
			r, rm := renumber(evs, mods, rng)
			if got := mustCanon(t, r, rm); !bytes.Equal(got, base) {
				t.Fatal("renumbered value and module ids changed the rendering")
			}
		}
		// Changes of meaning.
		var valueGUIDs, profiles []int
		for i, ev := range evs {
			if ev.kind != evRecord {
				continue
			}
			switch ev.code {
			case fsValueGUID:
				valueGUIDs = append(valueGUIDs, i)
			case fsCombinedProfile:
				profiles = append(profiles, i)
			}
		}
		if len(valueGUIDs) < 2 || len(profiles) < 1 {
			continue
		}
		tested++
		differs := func(what string, mutate func(evs []heldEvent)) {
			t.Helper()
			m := cloneEvents(evs)
			mutate(m)
			if got, ok := canonicalSummary(m, mods); ok && bytes.Equal(got, base) {
				t.Errorf("%s: same rendering", what)
			}
		}
		differs("two value ids swap GUIDs", func(m []heldEvent) {
			a, b := valueGUIDs[0], valueGUIDs[1]
			m[a].ops[0], m[b].ops[0] = m[b].ops[0], m[a].ops[0]
		})
		differs("instcount", func(m []heldEvent) { m[profiles[0]].ops[3]++ })
		differs("flags", func(m []heldEvent) { m[profiles[0]].ops[2] ^= 1 })
		differs("module id", func(m []heldEvent) { m[profiles[0]].ops[1]++ })
		differs("a summary of another value", func(m []heldEvent) {
			other := m[valueGUIDs[0]].ops[0]
			if other == m[profiles[0]].ops[0] {
				other = m[valueGUIDs[1]].ops[0]
			}
			m[profiles[0]].ops[0] = other
		})
		differs("a GUID", func(m []heldEvent) { m[valueGUIDs[0]].ops[2] ^= 1 })
	}
	if tested == 0 {
		t.Fatal("no shard had summaries to mutate")
	}
}

// TestCanonicalSummaryRefuses: blocks outside what the canonical form
// knows are rendered as they are (ok=false), never half-canonicalised.
func TestCanonicalSummaryRefuses(t *testing.T) {
	rec := func(code uint64, ops ...uint64) heldEvent {
		return heldEvent{kind: evRecord, blockID: globalValSummaryBlockID, code: code, ops: ops}
	}
	good := []heldEvent{
		rec(fsVersion, canonicalSummaryVersion),
		rec(fsFlags, 0),
		rec(fsValueGUID, 1, 0, 100),
		rec(fsValueGUID, 2, 0, 200),
		// valueid 1 calls 2; one ref to 2.
		rec(fsCombinedProfile, 1, 0, 96, 10, 64, 0, 1, 0, 0, 2, 2, 8),
		rec(fsCombinedGlobalVarRefs, 2, 0, 97, 4),
		rec(fsCombinedAlias, 1, 0, 96, 0),
	}
	mods := map[uint64][]byte{0: []byte("module a"), 1: []byte("module b")}
	if _, ok := canonicalSummary(good, mods); !ok {
		t.Fatal("the well-formed block was refused")
	}
	for name, mutate := range map[string]func([]heldEvent) []heldEvent{
		"other version":  func(e []heldEvent) []heldEvent { e[0].ops[0] = 11; return e },
		"no version":     func(e []heldEvent) []heldEvent { return e[1:] },
		"unknown record": func(e []heldEvent) []heldEvent { return append(e, rec(25, 1, 2, 3)) },
		"type tests before a variable": func(e []heldEvent) []heldEvent {
			return append(e[:5], append([]heldEvent{rec(fsTypeTests, 5)}, e[5:]...)...)
		},
		"type tests at the end": func(e []heldEvent) []heldEvent { return append(e, rec(fsTypeTests, 5)) },
		"empty type tests": func(e []heldEvent) []heldEvent {
			return append(e[:4], append([]heldEvent{rec(fsTypeTests)}, e[4:]...)...)
		},
		"odd vcall list": func(e []heldEvent) []heldEvent {
			return append(e[:4], append([]heldEvent{rec(fsTypeTestAssumeVCalls, 5, 8, 6)}, e[4:]...)...)
		},
		"short const vcall": func(e []heldEvent) []heldEvent {
			return append(e[:4], append([]heldEvent{rec(fsTypeCheckedLoadConstVC, 5)}, e[4:]...)...)
		},
		"out of phase":       func(e []heldEvent) []heldEvent { e[5], e[6] = e[6], e[5]; return e },
		"unknown value id":   func(e []heldEvent) []heldEvent { e[4].ops[9] = 7; return e },
		"numrefs too large":  func(e []heldEvent) []heldEvent { e[4].ops[6] = 9; return e },
		"ro+wo over numrefs": func(e []heldEvent) []heldEvent { e[4].ops[7], e[4].ops[8] = 1, 1; return e },
		"odd call list":      func(e []heldEvent) []heldEvent { e[4].ops = e[4].ops[:11]; return e },
		"duplicate id":       func(e []heldEvent) []heldEvent { e[3].ops[0] = 1; return e },
		"duplicate GUID":     func(e []heldEvent) []heldEvent { e[3].ops[2] = 100; return e },
		"value id 0":         func(e []heldEvent) []heldEvent { e[2].ops[0] = 0; return e },
		"short alias":        func(e []heldEvent) []heldEvent { e[6].ops = e[6].ops[:3]; return e },
		"nested block":       func(e []heldEvent) []heldEvent { return append(e, heldEvent{kind: evEnter, blockID: 99}) },
		"blob":               func(e []heldEvent) []heldEvent { e[1].hasBlob = true; return e },
		"unknown module id":  func(e []heldEvent) []heldEvent { e[5].ops[1] = 7; return e },
	} {
		if _, ok := canonicalSummary(mutate(cloneEvents(good)), mods); ok {
			t.Errorf("%s: canonicalised", name)
		}
	}
	// Two summaries of one GUID keep their order.
	two := cloneEvents(good)
	two = append(two[:6], append([]heldEvent{rec(fsCombinedProfile, 1, 1, 96, 11, 64, 0, 0, 0, 0)}, two[6:]...)...)
	swapped := cloneEvents(two)
	swapped[4], swapped[6] = swapped[6], swapped[4]
	a, okA := canonicalSummary(two, mods)
	b, okB := canonicalSummary(swapped, mods)
	if !okA || !okB {
		t.Fatal("two summaries of one GUID: refused")
	}
	if bytes.Equal(a, b) {
		t.Error("two summaries of one GUID in the other order render the same")
	}
}
