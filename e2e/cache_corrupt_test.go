package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/testprog"
)

// objectEntries returns the path of every action record of the cache,
// sorted, and the object each holds (the record's out/0, kept in it).
func objectEntries(t *testing.T, dir string) (records []string, objects [][]byte) {
	t.Helper()
	for rel := range cacheFiles(t, dir) {
		if strings.HasPrefix(rel, "ac/") {
			records = append(records, rel)
		}
	}
	sort.Strings(records)
	for _, rel := range records {
		data := readFile(t, filepath.Join(dir, rel))
		var ar repb.ActionResult
		if err := proto.Unmarshal(data[32:], &ar); err != nil {
			t.Fatalf("record %s: %v", rel, err)
		}
		var obj []byte
		for _, f := range ar.OutputFiles {
			if f.Path == "out/0" {
				obj = f.Contents
			}
		}
		if len(obj) == 0 {
			t.Fatalf("record %s does not hold its object", rel)
		}
		objects = append(objects, obj)
	}
	return records, objects
}

// TestCacheCorruption damages three entries of a warm cache: a flipped byte in
// one object, another object truncated (each in its record), a third
// action's record deleted.
// The relink must recompile exactly those three, produce the same program,
// and leave the cache whole again.
func TestCacheCorruption(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 6, Seed: 4, ArchiveModules: 2})
	cold := r.link(link{})
	ref := keep(t, cold, "prog.ref")
	records, objects := objectEntries(t, r.cacheDir)
	if len(records) != len(cold.modules()) {
		t.Fatalf("%d action records after a cold link of %d jobs", len(records), len(cold.modules()))
	}
	abs := func(rel string) string { return filepath.Join(r.cacheDir, rel) }

	// Flip a byte in the middle of the first object, inside its record.
	rec := readFile(t, abs(records[0]))
	at := bytes.Index(rec, objects[0]) + len(objects[0])/2
	rec[at] ^= 0x40
	if err := os.WriteFile(abs(records[0]), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	// Truncate the second record in its object (the object's ELF header
	// whole).
	rec = readFile(t, abs(records[1]))
	if err := os.Truncate(abs(records[1]), int64(bytes.Index(rec, objects[1])+100)); err != nil {
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

	// Every entry replaced: the records whole again, the third back.
	checkCacheIntact(t, r.cacheDir)
	files := cacheFiles(t, r.cacheDir)
	for _, p := range records[:3] {
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
