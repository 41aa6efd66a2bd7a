package bitcode

import (
	"bytes"
	"os"
	"testing"
)

// TestPermutedValueIDsRealPair: two index shards of one job (main.o of a
// 200-module program with 90 archive members) from two links of the same
// objects. Besides the PID-bearing member paths, lld numbered several
// summaries' value ids differently (e.g. 262 and 263 swapped) and wrote
// the records in that order. They mean the same and must digest the same.
func TestPermutedValueIDsRealPair(t *testing.T) {
	a, err := os.ReadFile("testdata/valueid-perm-main.link1.thinlto.bc")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/valueid-perm-main.link2.thinlto.bc")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("the pair is identical; the test needs two differing shards")
	}
	da, err := NormalizedDigest(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := NormalizedDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("digests differ for shards that differ only in PIDs and value-id numbering")
	}
}
