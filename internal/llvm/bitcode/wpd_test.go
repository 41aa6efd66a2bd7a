package bitcode

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// A C++ program built for whole-program devirtualisation: its shards carry
// type metadata records (FS_TYPE_TEST_ASSUME_CONST_VCALL and friends)
// before the function summaries that make virtual calls.
var wpdSources = map[string]string{
	"shape.h": `struct Shape { virtual ~Shape() {} virtual int area() const = 0; virtual int sides() const { return 0; } };
Shape *make_sq(int); Shape *make_tri(int); Shape *make_rect(int, int);
int total(Shape **s, int n);
`,
	"sq.cc":   "#include \"shape.h\"\nstruct Sq : Shape { int a; Sq(int x) : a(x) {} int area() const override { return a * a; } int sides() const override { return 4; } };\nShape *make_sq(int a) { return new Sq(a); }\n",
	"tri.cc":  "#include \"shape.h\"\nstruct Tri : Shape { int b, h; Tri(int x) : b(x), h(x + 1) {} int area() const override { return b * h / 2; } int sides() const override { return 3; } };\nShape *make_tri(int a) { return new Tri(a); }\n",
	"rect.cc": "#include \"shape.h\"\nstruct Rect : Shape { int w, h; Rect(int x, int y) : w(x), h(y) {} int area() const override { return w * h; } };\nShape *make_rect(int a, int b) { return new Rect(a, b); }\n",
	"total.cc": "#include \"shape.h\"\nint total(Shape **s, int n) { int t = 0; for (int i = 0; i < n; i++) t += s[i]->area() + s[i]->sides(); return t; }\n" +
		"int first_sides(Shape *s) { return s->sides(); }\n",
	"main.cc": "#include \"shape.h\"\nint main(int argc, char **) { Shape *s[3] = {make_sq(argc + 2), make_tri(argc + 3), make_rect(argc, 5)}; return total(s, 3) & 0x7f; }\n",
}

var wpdFlags = []string{"-O2", "-flto=thin", "-fwhole-program-vtables", "-fvisibility=hidden"}

// wpdLinks builds the program (sq, tri and rect in an archive) and links it
// n times through the test distributor; it returns each link's shards keyed
// by the job's module with the member's PID removed.
func wpdLinks(t *testing.T, n int) []map[string][]byte {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang++", "llvm-ar", "ld.lld")
	p := &project{t: t, dir: t.TempDir()}
	for name, src := range wpdSources {
		p.write(name, src)
	}
	for _, f := range []string{"sq", "tri", "rect", "total", "main"} {
		p.run(nil, "clang++", append(wpdFlags, "-c", f+".cc", "-o", f+".o")...)
	}
	p.run(nil, "llvm-ar", "rcs", "libshape.a", "sq.o", "tri.o", "rect.o")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var links []map[string][]byte
	for i := range n {
		shardDir := filepath.Join(p.dir, "shards", string(rune('a'+i)))
		if err := os.MkdirAll(shardDir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.run([]string{distributorEnv + "=" + shardDir}, "clang++", append(wpdFlags, "-fuse-ld=lld",
			"main.o", "total.o", "libshape.a", "-fthinlto-distributor="+exe, "-o", "prog")...)
		files, _ := filepath.Glob(filepath.Join(shardDir, "*.thinlto.bc"))
		shards := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := os.ReadFile(strings.TrimSuffix(f, ".thinlto.bc") + ".module")
			if err != nil {
				t.Fatal(err)
			}
			shards[stripPID(string(mod))] = b
		}
		if len(shards) != 5 {
			t.Fatalf("link %d: %d shards, want 5", i, len(shards))
		}
		links = append(links, shards)
	}
	return links
}

// TestCanonicalSummaryTypeMetadata: shards of a program built for
// whole-program devirtualisation are canonicalised (they used to be hashed
// as decoded, so a relink that numbered their summaries differently missed
// the cache); renumbering their summaries changes nothing, while changing
// or moving a type metadata record changes the rendering.
func TestCanonicalSummaryTypeMetadata(t *testing.T) {
	links := wpdLinks(t, 2)
	rng := rand.New(rand.NewSource(2))
	withMeta := 0
	for mod, shard := range links[0] {
		evs, mods := summaryOf(t, shard)
		base, ok := canonicalSummary(evs, mods)
		if !ok {
			t.Fatalf("%s: the summary block was not canonicalised", mod)
		}
		for range 5 {
			r, rm := renumber(evs, mods, rng)
			if got := mustCanon(t, r, rm); !bytes.Equal(got, base) {
				t.Fatalf("%s: renumbered value ids changed the rendering", mod)
			}
		}
		var meta, profiles []int
		for i, ev := range evs {
			switch {
			case isTypeMetadata(ev):
				meta = append(meta, i)
			case ev.kind == evRecord && ev.code == fsCombinedProfile:
				profiles = append(profiles, i)
			}
		}
		if len(meta) == 0 {
			continue
		}
		withMeta++
		m := cloneEvents(evs)
		m[meta[0]].ops[len(m[meta[0]].ops)-1]++
		if got, ok := canonicalSummary(m, mods); ok && bytes.Equal(got, base) {
			t.Errorf("%s: a changed type metadata record renders the same", mod)
		}
		// Move the first function's type metadata to another function.
		owner := meta[0]
		for isTypeMetadata(evs[owner]) {
			owner++
		}
		for _, p := range profiles {
			if p == owner || isTypeMetadata(evs[p-1]) {
				continue
			}
			var moved []heldEvent
			for i, ev := range cloneEvents(evs) {
				if i >= meta[0] && i < owner {
					continue
				}
				if i == p {
					moved = append(moved, cloneEvents(evs[meta[0]:owner])...)
				}
				moved = append(moved, ev)
			}
			if got, ok := canonicalSummary(moved, mods); ok && bytes.Equal(got, base) {
				t.Errorf("%s: type metadata moved to another function renders the same", mod)
			}
			break
		}
	}
	if withMeta == 0 {
		t.Fatal("no shard carries type metadata: the test does not exercise it")
	}
	for mod, a := range links[0] {
		if mustDigest(t, a) != mustDigest(t, links[1][mod]) {
			t.Errorf("%s: NormalizedDigest differs across links", mod)
		}
	}
}
