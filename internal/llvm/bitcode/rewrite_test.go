package bitcode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
)

// renameTo renames modules by their modid.
func renameTo(paths map[uint64]string) func(Module) string {
	return func(m Module) string {
		if p, ok := paths[m.ID]; ok {
			return p
		}
		return m.Path
	}
}

func mustRewrite(t *testing.T, shard []byte, rename func(Module) string) []byte {
	t.Helper()
	out, err := RewriteModulePaths(shard, rename)
	if err != nil {
		t.Fatalf("RewriteModulePaths: %v", err)
	}
	return out
}

func wrap(raw []byte, trailer string) []byte {
	hdr := make([]byte, 20)
	binary.LittleEndian.PutUint32(hdr[0:], wrapperMagic)
	binary.LittleEndian.PutUint32(hdr[8:], 20)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(hdr[16:], 7)
	return append(append(hdr, raw...), trailer...)
}

// TestRewriteSynthetic: a rewritten shard is byte for byte the shard the
// writer makes with the new paths (the synthetic writer, like LLVM's, picks
// the narrowest abbreviation), whatever the lengths and character sets, in
// the raw and the wrapped form.
func TestRewriteSynthetic(t *testing.T) {
	z := [5]uint32{}
	old := []synthMod{{0, "/abs/dir/lib.a(x.o at 10).2.1F.o", hA}, {1, "main.o", hB}, {2, "nohash_o", z}, {3, "short", [5]uint32{9, 9, 9, 9, 9}}}
	opts := []synthOpts{
		{summaries: []uint64{0, 1, 3}, blob: "strtab"},
		{summaries: []uint64{3, 2, 1, 0}, blob: "", unabbrevHash: true},
	}
	renames := []map[uint64]string{
		{0: ".thindist/abs/0.o"}, // shorter, 8-bit -> 8-bit
		{0: "abs_0.o", 1: "a_much_longer_name_made_of_char6_characters_only_to_cross_a_word.o"}, // -> char6
		{1: "/x", 2: "n\xe9/u (2).o", 3: "s"},                                                   // char6 -> 8-bit, non-ASCII, one character
		{0: "main.o", 1: "/abs/dir/lib.a(x.o at 10).2.1F.o"},                                    // swapped
	}
	for i, o := range opts {
		for j, rn := range renames {
			t.Run(fmt.Sprintf("opts%d/rename%d", i, j), func(t *testing.T) {
				var renamed []synthMod
				for _, m := range old {
					if p, ok := rn[m.id]; ok {
						m.path = p
					}
					renamed = append(renamed, m)
				}
				src, want := synthShard(old, o), synthShard(renamed, o)
				if got := mustRewrite(t, src, renameTo(rn)); !bytes.Equal(got, want) {
					t.Errorf("rewritten shard differs from one written with the new paths:\n got % x\nwant % x", got, want)
				}
				if got := mustRewrite(t, wrap(src, "\x00\x00pad"), renameTo(rn)); !bytes.Equal(got, wrap(want, "\x00\x00pad")) {
					t.Errorf("wrapped: rewritten shard differs")
				}
				back := map[uint64]string{}
				for _, m := range old {
					back[m.id] = m.path
				}
				if got := mustRewrite(t, want, renameTo(back)); !bytes.Equal(got, src) {
					t.Errorf("rewriting back does not give the original")
				}
			})
		}
	}
}

// TestRewriteKeepsDigest: with every module identified by its hash, the
// normalised digest (the cache key's view of the shard) does not see the
// rewrite.
func TestRewriteKeepsDigest(t *testing.T) {
	src := synthShard([]synthMod{{0, "/tmp/x/lib.a(m.o at 8).1.ABC.o", hA}, {1, "/tmp/x/main.o", hB}},
		synthOpts{summaries: []uint64{0, 1}, blob: "s"})
	got := mustRewrite(t, src, renameTo(map[uint64]string{0: ".thindist/abs/h1.o", 1: ".thindist/abs/h2.o"}))
	if mustDigest(t, got) != mustDigest(t, src) {
		t.Error("the digest changed")
	}
	mods, err := ModuleTable(got)
	if err != nil || mods[0].Path != ".thindist/abs/h1.o" || mods[1].Path != ".thindist/abs/h2.o" || mods[0].Hash != hA || mods[1].Hash != hB {
		t.Errorf("module table %+v, %v", mods, err)
	}
}

func TestRewriteRefuses(t *testing.T) {
	src := synthShard([]synthMod{{0, "a.o", hA}, {1, "b.o", hB}}, synthOpts{summaries: []uint64{0, 1}, blob: "s"})
	if out, err := RewriteModulePaths(src, func(m Module) string { return m.Path }); err != nil || &out[0] != &src[0] {
		t.Errorf("unchanged paths: %v, or a copy", err)
	}
	for name, rn := range map[string]func(Module) string{
		"duplicate": func(Module) string { return "same.o" },
		"empty": func(m Module) string {
			if m.Path == "a.o" {
				return ""
			}
			return m.Path
		},
	} {
		if _, err := RewriteModulePaths(src, rn); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := RewriteModulePaths([]byte("BC\xC0\xDE\x01"), renameTo(nil)); !errors.Is(err, ErrFormat) {
		t.Errorf("malformed input: %v", err)
	}
}

// FuzzRewriteModulePaths: whatever the input, a rewrite that succeeds
// reads back with the new paths, and rewriting back gives a shard that
// decodes exactly as the input did.
func FuzzRewriteModulePaths(f *testing.F) {
	f.Add(synthShard([]synthMod{{0, "a.a(x.o at 1).2.AB.o", hA}, {1, "main.o", hB}}, synthOpts{summaries: []uint64{0, 1}, blob: "s"}))
	f.Add(wrap(synthShard([]synthMod{{0, "x", hA}, {1, "y", [5]uint32{}}}, synthOpts{unabbrevHash: true}), "\x00"))
	for _, name := range []string{"valueid-perm-main.link1.thinlto.bc", "valueid-perm-main.link2.thinlto.bc"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mods, err := ModuleTable(data)
		if err != nil {
			return
		}
		var dump bytes.Buffer
		if err := Dump(&dump, data); err != nil {
			t.Fatalf("Dump rejects what ModuleTable read: %v", err)
		}
		newPath := func(m Module) string { return fmt.Sprintf("r/%d/%s/%d", m.ID, m.Path, len(m.Path)) }
		out, err := RewriteModulePaths(data, newPath)
		if err != nil {
			return // e.g. a subblock in the table: refused, never half done
		}
		got, err := ModuleTable(out)
		if err != nil || len(got) != len(mods) {
			t.Fatalf("the result reads back as %d modules, %v", len(got), err)
		}
		oldOf := map[string]string{}
		for i, m := range got {
			if m.Path != newPath(mods[i]) || m.ID != mods[i].ID || m.Hash != mods[i].Hash {
				t.Fatalf("module %d reads back as %+v", i, m)
			}
			oldOf[m.Path] = mods[i].Path
		}
		back, err := RewriteModulePaths(out, func(m Module) string { return oldOf[m.Path] })
		if err != nil {
			t.Fatalf("rewriting back: %v", err)
		}
		var dumpBack bytes.Buffer
		if err := Dump(&dumpBack, back); err != nil || dumpBack.String() != dump.String() {
			t.Fatalf("rewritten back, the shard decodes differently (%v):\n%s\nwant\n%s", err, dumpBack.String(), dump.String())
		}
		d1, err1 := NormalizedDigest(data)
		d2, err2 := NormalizedDigest(back)
		if (err1 == nil) != (err2 == nil) || d1 != d2 {
			t.Fatalf("digest %x (%v) after the round trip, %x (%v) before", d2, err2, d1, err1)
		}
	})
}
