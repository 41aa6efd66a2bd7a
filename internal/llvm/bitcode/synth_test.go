package bitcode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type synthMod struct {
	id   uint64
	path string
	hash [5]uint32 // zero: no HASH record
}

type synthOpts struct {
	unabbrevHash bool     // write HASH records unabbreviated
	summaries    []uint64 // modid operands of the summary records
	blob         string
}

// synthShard builds a shard shaped like lld's: MODULE_BLOCK{VERSION,
// BLOCKINFO, MODULE_STRTAB, GLOBALVAL_SUMMARY}, STRTAB. Paths made only of
// char6 characters use a char6 abbreviation registered through BLOCKINFO,
// others an 8-bit array abbreviation defined in the block.
func synthShard(mods []synthMod, o synthOpts) []byte {
	w := newBitWriter()
	w.enter(8, 3)
	w.unabbrev(1, 2)
	w.enter(blockInfoBlockID, 2)
	w.unabbrev(blockInfoSetBID, moduleStrtabBlockID)
	w.abbrevDef(abbrevOp{encLiteral, 1}, abbrevOp{encVBR, 8}, abbrevOp{encArray, 0}, abbrevOp{encChar6, 0}) // id 4
	w.exit()
	w.enter(moduleStrtabBlockID, 3)
	w.abbrevDef(abbrevOp{encLiteral, 1}, abbrevOp{encVBR, 8}, abbrevOp{encArray, 0}, abbrevOp{encFixed, 8}) // id 5
	w.abbrevDef(abbrevOp{encLiteral, 2}, abbrevOp{encArray, 0}, abbrevOp{encFixed, 32})                     // id 6
	for _, m := range mods {
		isChar6 := true
		for i := 0; i < len(m.path); i++ {
			if !strings.ContainsRune(char6Table, rune(m.path[i])) {
				isChar6 = false
			}
		}
		if isChar6 {
			w.emit(4, 3)
			w.vbr(m.id, 8)
			w.vbr(uint64(len(m.path)), 6)
			for i := 0; i < len(m.path); i++ {
				w.emit(char6(m.path[i]), 6)
			}
		} else {
			w.emit(5, 3)
			w.vbr(m.id, 8)
			w.vbr(uint64(len(m.path)), 6)
			for i := 0; i < len(m.path); i++ {
				w.emit(uint64(m.path[i]), 8)
			}
		}
		if m.hash == ([5]uint32{}) {
			continue
		}
		if o.unabbrevHash {
			h := m.hash
			w.unabbrev(mstCodeHash, uint64(h[0]), uint64(h[1]), uint64(h[2]), uint64(h[3]), uint64(h[4]))
		} else {
			w.emit(6, 3)
			w.vbr(5, 6)
			for _, v := range m.hash {
				w.emit(uint64(v), 32)
			}
		}
	}
	w.exit()
	w.enter(20, 4)
	w.unabbrev(1, 12)
	for i, modid := range o.summaries {
		w.unabbrev(11, uint64(i+1), modid, 96, 3)
	}
	w.exit()
	w.exit()
	w.enter(23, 3)
	w.abbrevDef(abbrevOp{encLiteral, 1}, abbrevOp{encBlob, 0})
	w.emit(4, 3)
	w.vbr(uint64(len(o.blob)), 6)
	w.align()
	for i := 0; i < len(o.blob); i++ {
		w.emit(uint64(o.blob[i]), 8)
	}
	w.align()
	w.exit()
	return w.bytes()
}

func mustDigest(t *testing.T, b []byte) [32]byte {
	t.Helper()
	d, err := NormalizedDigest(b)
	if err != nil {
		t.Fatalf("NormalizedDigest: %v", err)
	}
	return d
}

var (
	hA = [5]uint32{1, 2, 3, 4, 5}
	hB = [5]uint32{6, 7, 8, 9, 0xFFFFFFFF}
)

func TestSyntheticModuleTable(t *testing.T) {
	mods := []synthMod{{0, "lib.a(x.o at 10).2.1F.o", hA}, {1, "main.o", hB}, {2, "nohash_o", [5]uint32{}}}
	b := synthShard(mods, synthOpts{summaries: []uint64{0, 1}, blob: "strtab"})
	got, err := ModuleTable(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Module{{0, mods[0].path, hA}, {1, "main.o", hB}, {2, "nohash_o", [5]uint32{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ModuleTable = %+v, want %+v", got, want)
	}
	if table, d, err := TableAndDigest(b); err != nil || !reflect.DeepEqual(table, want) || d != mustDigest(t, b) {
		t.Fatalf("TableAndDigest = %+v, %x, %v; want ModuleTable's and NormalizedDigest's", table, d, err)
	}

	// The same file inside a bitcode wrapper.
	hdr := make([]byte, 20)
	binary.LittleEndian.PutUint32(hdr[0:], wrapperMagic)
	binary.LittleEndian.PutUint32(hdr[8:], 20)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(b)))
	binary.LittleEndian.PutUint32(hdr[16:], 7)
	wrapped := append(hdr, b...)
	got, err = ModuleTable(wrapped)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("wrapped ModuleTable = %+v, %v", got, err)
	}
	if mustDigest(t, wrapped) == mustDigest(t, b) {
		t.Error("wrapper (cputype) not reflected in digest")
	}
	var dump bytes.Buffer
	if err := Dump(&dump, wrapped); err != nil || !strings.Contains(dump.String(), `"main.o"`) {
		t.Errorf("Dump: %v\n%s", err, dump.String())
	}
}

func TestSyntheticDigest(t *testing.T) {
	base := synthOpts{summaries: []uint64{0, 1, 1}, blob: "names"}
	mods := func(p0, p1 string, h0, h1 [5]uint32) []synthMod {
		return []synthMod{{0, p0, h0}, {1, p1, h1}}
	}
	ref := synthShard(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, hB), base)
	refD := mustDigest(t, ref)

	same := map[string][]byte{
		// Different PID: different path length and character set (char6
		// vs 8-bit abbreviation), so different abbrevs and block sizes.
		"pid":        synthShard(mods("a.a(x.o at 1).2.1234ABCD.o", "main.o", hA, hB), base),
		"char6 path": synthShard(mods("anything_else.o", "main.o", hA, hB), base),
		"unabbrev hash": synthShard(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, hB),
			synthOpts{summaries: base.summaries, blob: base.blob, unabbrevHash: true}),
	}
	for name, b := range same {
		if bytes.Equal(b, ref) {
			t.Fatalf("%s: test input identical to reference", name)
		}
		if mustDigest(t, b) != refD {
			t.Errorf("%s: digest differs, want equal", name)
		}
	}

	differ := map[string][]byte{
		"content hash": synthShard(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, [5]uint32{6, 7, 8, 9, 1}), base),
		"swapped ids":  synthShard([]synthMod{{1, "a.a(x.o at 1).2.AB.o", hA}, {0, "main.o", hB}}, base),
		"summary ref":  synthShard(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, hB), synthOpts{summaries: []uint64{0, 1, 0}, blob: "names"}),
		"blob":         synthShard(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, hB), synthOpts{summaries: base.summaries, blob: "namez"}),
		"extra module": synthShard(append(mods("a.a(x.o at 1).2.AB.o", "main.o", hA, hB), synthMod{2, "z.o", hA}), base),
	}
	for name, b := range differ {
		if mustDigest(t, b) == refD {
			t.Errorf("%s: digest equal, want different", name)
		}
	}

	// Without a hash the path is all we know: it must count.
	z := [5]uint32{}
	if mustDigest(t, synthShard(mods("p1.o", "main.o", z, hB), base)) ==
		mustDigest(t, synthShard(mods("p2.o", "main.o", z, hB), base)) {
		t.Error("zero-hash module: path change not reflected in digest")
	}
	// Two entries with one hash are told apart only by path: keep it.
	if mustDigest(t, synthShard(mods("p1.o", "main.o", hA, hA), base)) ==
		mustDigest(t, synthShard(mods("p2.o", "main.o", hA, hA), base)) {
		t.Error("duplicate-hash modules: path change not reflected in digest")
	}
}

func TestMalformed(t *testing.T) {
	good := synthShard([]synthMod{{0, "a.o", hA}, {1, "b(c).o", hB}}, synthOpts{summaries: []uint64{0, 1}, blob: "xyz"})
	if _, err := NormalizedDigest(good); err != nil {
		t.Fatal(err)
	}
	// Every proper prefix is malformed (block lengths no longer fit)
	// unless it ends exactly after a complete top-level block.
	complete := map[int]bool{}
	for n := 0; n < len(good); n++ {
		_, err := NormalizedDigest(good[:n])
		if err == nil {
			complete[n] = true
			continue
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("prefix %d: error %v does not wrap ErrFormat", n, err)
		}
	}
	if len(complete) != 1 {
		t.Errorf("prefixes accepted: %v, want only the one ending after MODULE_BLOCK", complete)
	}
	// Flip each bit: must not panic; most flips must be rejected or change
	// the digest, never silently equal the original with a changed module
	// table.
	ref := mustDigest(t, good)
	refMods, _ := ModuleTable(good)
	for i := 0; i < len(good)*8; i++ {
		b := append([]byte(nil), good...)
		b[i/8] ^= 1 << (i % 8)
		d, err := NormalizedDigest(b)
		if err != nil {
			continue
		}
		mods, _ := ModuleTable(b)
		if d == ref && !reflect.DeepEqual(mods, refMods) {
			// Only the path may change without changing the digest.
			for j := range mods {
				if mods[j].ID != refMods[j].ID || mods[j].Hash != refMods[j].Hash {
					t.Errorf("bit %d: table changed, digest did not", i)
				}
			}
		}
	}
	for _, b := range [][]byte{
		nil,
		[]byte("BC"),
		[]byte("BC\xC0\xDE"[:3]),
		[]byte("not bitcode at all"),
		{0xDE, 0xC0, 0x17, 0x0B, 0, 0, 0, 0, 20, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0},
		append([]byte("BC\xC0\xDE"), 0xFF, 0xFF, 0xFF, 0xFF),
	} {
		if _, err := NormalizedDigest(b); err == nil {
			t.Errorf("NormalizedDigest(%q) succeeded", b)
		}
	}
}
