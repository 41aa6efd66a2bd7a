package thinlink_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/source/thinlink"
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

// TestMllvmAsInProcess: -mllvm options reach the backends exactly when they
// reach lld's in-process ones: lld's own (-Wl,-mllvm,X) do, the driver's do
// not (clang does not pass them to the linker). The outputs, linked in one
// lld process, are byte-identical to in-process's; the option changes them.
func TestMllvmAsInProcess(t *testing.T) {
	var p *project
	for _, tc := range toolchains(t) {
		if tc.name == "llvm-22" {
			p = newProject(t, tc)
		}
	}
	if p == nil {
		t.Skip("needs LLVM 22")
	}
	link := func(out string, extra ...string) []string {
		cmd := p.mainLink(out)
		return append(cmd[:len(cmd)-2:len(cmd)-2], append(extra, "-o", out)...)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(p.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	run(t, p.dir, nil, link("ref-plain")...)
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"driver", []string{"-mllvm", "-align-all-functions=6"}},
		{"linker", []string{"-Wl,-mllvm,-align-all-functions=6"}},
	} {
		run(t, p.dir, nil, link("ref-"+c.name, c.extra...)...)
		p.mustLink(t, link("app-"+c.name, c.extra...), nil)
		if !bytes.Equal(read("app-"+c.name), read("ref-"+c.name)) {
			t.Errorf("%s -mllvm: the output differs from lld's in-process link's", c.name)
		}
		if changes := !bytes.Equal(read("ref-"+c.name), read("ref-plain")); changes != (c.name == "linker") {
			t.Errorf("%s -mllvm: changes lld's in-process output: %v", c.name, changes)
		}
	}
	// An option lld knows and clang does not (a code-generation flag of
	// lld's own) would make every backend fail: it is left out, and said.
	lr, err := p.link(t, link("app-lldonly", "-Wl,-mllvm,-relocation-model=pic", "-Wl,-mllvm,-align-all-functions=6"), nil)
	if err != nil {
		t.Fatalf("a link with an -mllvm option clang does not know: %v\n%s", err, lr.stderr)
	}
	if !strings.Contains(lr.stderr, "without -mllvm -relocation-model=pic:") || strings.Contains(lr.stderr, "align-all-functions") {
		t.Errorf("the note should name -relocation-model=pic alone:\n%s", lr.stderr)
	}
	mustEqual(t, "app-lldonly's output", run(t, p.dir, nil, "./app-lldonly"), wantMain)
	if !bytes.Equal(read("app-lldonly"), read("app-linker")) {
		t.Error("-align-all-functions=6 was not kept beside the option left out")
	}
}
