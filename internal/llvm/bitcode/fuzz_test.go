package bitcode

import (
	"io"
	"testing"
)

func FuzzNormalizedDigest(f *testing.F) {
	f.Add(synthShard([]synthMod{{0, "a.a(x.o at 1).2.AB.o", hA}, {1, "main.o", hB}},
		synthOpts{summaries: []uint64{0, 1}, blob: "s"}))
	f.Add([]byte("BC\xC0\xDE"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d1, err := NormalizedDigest(data)
		mods, errT := ModuleTable(data)
		errD := Dump(io.Discard, data)
		if err != nil {
			return
		}
		if errT != nil || errD != nil {
			t.Fatalf("NormalizedDigest accepted input that ModuleTable (%v) or Dump (%v) rejected", errT, errD)
		}
		d2, err := NormalizedDigest(data)
		if err != nil || d1 != d2 {
			t.Fatal("NormalizedDigest not deterministic")
		}
		_ = mods
	})
}
