package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// objectEntries returns, for every action record of the cache, the record's
// path and the path of its object blob (cas/), sorted by record.
func objectEntries(t *testing.T, dir string) (records, blobs []string) {
	t.Helper()
	var recs []string
	for rel := range cacheFiles(t, dir) {
		if strings.HasPrefix(rel, "ac/") {
			recs = append(recs, rel)
		}
	}
	sort.Strings(recs)
	for _, rel := range recs {
		data := readFile(t, filepath.Join(dir, rel))
		var ar repb.ActionResult
		if err := proto.Unmarshal(data[32:], &ar); err != nil {
			t.Fatalf("record %s: %v", rel, err)
		}
		var obj string
		for _, f := range ar.OutputFiles {
			if f.Path == "out/0" {
				obj = filepath.Join("cas", f.Digest.Hash[:2], f.Digest.Hash)
			}
		}
		if obj == "" {
			t.Fatalf("record %s has no out/0", rel)
		}
		records = append(records, rel)
		blobs = append(blobs, obj)
	}
	return records, blobs
}

// TestCacheCorruption damages three entries of a warm cache: a flipped byte in
// one object, another object truncated, a third action's record deleted.
// The relink must recompile exactly those three, produce the same program,
// and leave the cache whole again.
func TestCacheCorruption(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 6, Seed: 4, ArchiveModules: 2})
	cold := r.link(link{})
	ref := keep(t, cold, "prog.ref")
	records, blobs := objectEntries(t, r.cacheDir)
	if len(records) != len(cold.modules()) {
		t.Fatalf("%d action records after a cold link of %d jobs", len(records), len(cold.modules()))
	}
	abs := func(rel string) string { return filepath.Join(r.cacheDir, rel) }

	// Flip a byte in the middle of the first object (blobs are read-only).
	os.Chmod(abs(blobs[0]), 0o644)
	os.Chmod(abs(blobs[1]), 0o644)
	flipped := readFile(t, abs(blobs[0]))
	flipped[len(flipped)/2] ^= 0x40
	if err := os.WriteFile(abs(blobs[0]), flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	// Truncate the second (keeping its ELF header, so only the digest can
	// tell).
	if err := os.Truncate(abs(blobs[1]), 100); err != nil {
		t.Fatal(err)
	}
	// Delete the third action's record.
	if err := os.Remove(abs(records[2])); err != nil {
		t.Fatal(err)
	}

	res := r.link(link{})
	if len(res.compiled) != 3 {
		t.Errorf("relink over 3 damaged entries compiled %q, want 3 jobs", res.compiled)
	}
	if s := res.summary(t); s.cached != len(records)-3 || s.local != 3 {
		t.Errorf("summary %+v, want %d cached and 3 local", s, len(records)-3)
	}
	sameBinary(t, "relink over a damaged cache", readFile(t, res.out), ref)
	if got := runProg(t, r.p, res.out); got != r.p.Want {
		t.Errorf("the program prints %q, want %q", got, r.p.Want)
	}

	// Every entry replaced: the blobs whole again, the record back.
	checkCacheIntact(t, r.cacheDir)
	files := cacheFiles(t, r.cacheDir)
	for _, p := range []string{blobs[0], blobs[1], records[2]} {
		if _, ok := files[p]; !ok {
			t.Errorf("%s was not replaced", p)
		}
	}
	again := r.link(link{})
	if len(again.compiled) != 0 {
		t.Errorf("the relink after the repair compiled %q, want nothing", again.compiled)
	}
	sameBinary(t, "relink after the repair", readFile(t, again.out), ref)
}
