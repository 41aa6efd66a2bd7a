package bitcode

import (
	"os"
	"testing"
)

// BenchmarkTableAndDigest: a cache key decodes one index shard per backend.
func BenchmarkTableAndDigest(b *testing.B) {
	data, err := os.ReadFile("testdata/valueid-perm-main.link1.thinlto.bc")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := TableAndDigest(data); err != nil {
			b.Fatal(err)
		}
	}
}
