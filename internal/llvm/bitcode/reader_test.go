package bitcode

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refRead reads n bits at pos one bit at a time: what read and readVBR's
// word-at-a-time paths must agree with.
func refRead(data []byte, pos uint64, n uint) uint64 {
	var v uint64
	for i := uint(0); i < n; i++ {
		p := pos + uint64(i)
		v |= uint64(data[p/8]>>(p%8)&1) << i
	}
	return v
}

func refVBR(data []byte, pos, end uint64, n uint) (v, next uint64, ok bool) {
	var shift uint
	for {
		if pos+uint64(n) > end {
			return 0, 0, false
		}
		piece := refRead(data, pos, n)
		pos += uint64(n)
		data := piece & (1<<(n-1) - 1)
		if shift >= 64 || (shift > 0 && data>>(64-shift) != 0) {
			return 0, 0, false
		}
		v |= data << shift
		if piece&(1<<(n-1)) == 0 {
			return v, pos, true
		}
		shift += n - 1
	}
}

// TestBitReaderAgainstReference reads random fields and VBRs from random
// bytes, near the end of the data too (where the one-load paths do not
// apply), and compares each value and position with a bit-at-a-time read.
func TestBitReaderAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 2000; round++ {
		data := make([]byte, 1+rng.Intn(40))
		rng.Read(data)
		if round%3 == 0 {
			// Continuation bits mostly clear, so that VBRs end: short
			// and long values both.
			for i := range data {
				data[i] &= byte(rng.Intn(256))
			}
		}
		end := uint64(len(data)) * 8
		if rng.Intn(2) == 0 {
			end -= uint64(rng.Intn(8)) // a limit inside the last byte
		}
		r := &bitReader{data: data, end: end}
		for r.pos < r.end {
			pos := r.pos
			if rng.Intn(2) == 0 {
				n := uint(rng.Intn(65))
				got, err := r.read(n)
				if pos+uint64(n) > end {
					if err == nil {
						t.Fatalf("read(%d) at %d of %d: no error", n, pos, end)
					}
					break
				}
				if err != nil || got != refRead(data, pos, n) || r.pos != pos+uint64(n) {
					t.Fatalf("read(%d) at %d: %#x, %v, pos %d; want %#x", n, pos, got, err, r.pos, refRead(data, pos, n))
				}
				continue
			}
			n := uint(2 + rng.Intn(31))
			want, next, ok := refVBR(data, pos, end, n)
			got, err := r.readVBR(n)
			if !ok {
				if err == nil {
					t.Fatalf("readVBR(%d) at %d of %d: %#x, want an error", n, pos, end, got)
				}
				break
			}
			if err != nil || got != want || r.pos != next {
				t.Fatalf("readVBR(%d) at %d: %#x, %v, pos %d; want %#x, pos %d", n, pos, got, err, r.pos, want, next)
			}
		}
	}
}

// TestWalkBuffersReused: walks that share their buffers (TableAndDigest's,
// from a pool) see each stream exactly as a walk with buffers of its own,
// whatever an earlier walk left in them: a smaller stream after a larger
// one, and the same stream again.
func TestWalkBuffersReused(t *testing.T) {
	var streams [][]byte
	for _, name := range []string{"valueid-perm-main.link1.thinlto.bc", "valueid-perm-main.link2.thinlto.bc"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, b)
	}
	// A stream defining more abbreviation operands than one chunk holds
	// (300 abbreviations, 900 operands), nested blocks at one depth.
	w := newBitWriter()
	w.enter(8, 3)
	for blk := 0; blk < 3; blk++ {
		w.enter(uint64(20+blk), 4)
		for i := 0; i < 100; i++ {
			w.abbrevDef(abbrevOp{encLiteral, uint64(i)}, abbrevOp{encFixed, uint64(1 + i%32)}, abbrevOp{encVBR, 6})
		}
		w.unabbrev(1, uint64(blk))
		w.exit()
	}
	w.exit()
	many := w.bytes()
	shard := synthShard([]synthMod{{0, "a.o", hA}, {1, "main.o", hB}}, synthOpts{summaries: []uint64{0, 1}, blob: "x"})
	streams = append(streams, many, shard, streams[0], many, streams[1])
	listing := func(data []byte, b *walkBuffers) string {
		c, err := unwrap(data)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		var abbrevs []abbrev // every abbreviation seen, read again at the end
		var seen []string    // and as it was when defined
		trailing, err := walkWith(c, b, func(ev *event) error {
			fmt.Fprintf(&out, "%d %d %d %v %d %v %q %d\n", ev.kind, ev.blockID, ev.depth, ev.abbrev, ev.code, ev.ops, ev.blob, len(ev.abbrevs))
			if ev.kind == evAbbrev {
				abbrevs = append(abbrevs, ev.abbrev)
				seen = append(seen, fmt.Sprint(ev.abbrev))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// An abbreviation read early still holds its operands at the end
		// of the walk: chunks are not reused within one.
		for i, a := range abbrevs {
			if got := fmt.Sprint(a); got != seen[i] {
				t.Fatalf("abbreviation %d was %s when defined, %s at the end of the walk", i, seen[i], got)
			}
		}
		fmt.Fprintf(&out, "trailing %d\n", trailing)
		return out.String()
	}
	shared := &walkBuffers{}
	for i, data := range streams {
		want := listing(data, &walkBuffers{})
		if got := listing(data, shared); got != want {
			t.Errorf("stream %d walked with reused buffers differs from a fresh walk", i)
		}
	}
}

// TestDigestPinned: the normalised digest is part of every cache key, so a
// change to how a shard is decoded or rendered must not change it by
// accident (the cache would miss everything, or worse, two renderings
// would meet). These are the digests the decoder gave before its walks
// reused their buffers and before its second walk jumped over the
// summary block; a deliberate change of rendering bumps digestDomain and
// these values with it.
func TestDigestPinned(t *testing.T) {
	shards := map[string][]byte{
		"synthetic": synthShard([]synthMod{{0, "a.o", hA}, {1, "main.o", hB}}, synthOpts{summaries: []uint64{0, 1}, blob: "x"}),
	}
	for _, name := range []string{"valueid-perm-main.link1.thinlto.bc", "valueid-perm-main.link2.thinlto.bc"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		shards[name] = b
	}
	want := map[string]string{
		"synthetic":                          "523962f399b67eb79e317d014e041d0f33b1879ebc6c97bd666de56d863aeb6d",
		"valueid-perm-main.link1.thinlto.bc": "6351dccc415f0071d065af64ad18d3ae30221d769f4cb73272810dc7f57ecd7e",
		"valueid-perm-main.link2.thinlto.bc": "6351dccc415f0071d065af64ad18d3ae30221d769f4cb73272810dc7f57ecd7e",
	}
	for name, data := range shards {
		_, d, err := TableAndDigest(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fmt.Sprintf("%x", d); got != want[name] {
			t.Errorf("%s: digest %s, want %s", name, got, want[name])
		}
	}
}
