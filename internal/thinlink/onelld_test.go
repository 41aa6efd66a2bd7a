package thinlink_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/thindist/thindist/internal/thinlink"
)

// TestOneLLDProcess: with lld 21 and later the link runs as one lld
// process, with thindist as its DTLTO distributor, and its output is
// byte-identical to lld's in-process ThinLTO link of the same command; with
// SeparateThinLink (and with lld 19, which has no DTLTO) it is a thin link
// and a final link. Both account for their time in the same phases.
func TestOneLLDProcess(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		run(t, p.dir, nil, p.mainLink("ref")...)
		ref, err := os.ReadFile(filepath.Join(p.dir, "ref"))
		if err != nil {
			t.Fatal(err)
		}
		for _, separate := range []bool{false, true} {
			var phases []string
			out := map[bool]string{false: "one", true: "two"}[separate]
			res := p.mustLink(t, p.mainLink(out), func(o *thinlink.Options) {
				o.SeparateThinLink = separate
				o.Phase = func(name string) func() {
					phases = append(phases, name)
					return func() {}
				}
			})
			one := tc.name != "llvm-19" && !separate
			if got := slices.Equal(res.ThinLink, res.Final); got != one {
				t.Errorf("separate %v: one linker command %v, want %v", separate, got, one)
			}
			want := []string{"reading the link", "thin link", "planning the backends", "final link"}
			if !slices.Equal(phases, want) {
				t.Errorf("separate %v: phases %q, want %q", separate, phases, want)
			}
			mustEqual(t, out+"'s output", run(t, p.dir, nil, "./"+out), wantMain)
			got, _ := os.ReadFile(filepath.Join(p.dir, out))
			if one && !bytes.Equal(got, ref) {
				t.Errorf("linked in one lld process, %s differs from lld's in-process link", out)
			}
		}
	})
}
