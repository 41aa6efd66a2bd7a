package action

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestArgvRendersReferences(t *testing.T) {
	a := &Action{
		ID:      "t1.o",
		Args:    []Arg{Lit("clang"), Lit("-c"), In("", 0), In("-fthinlto-index=", 1), Lit("-o"), Out("", 0)},
		Inputs:  []Input{{Path: "t1.o"}, {Path: "t1.1.99.native.o.thinlto.bc"}},
		Outputs: []Output{{Path: "t1.1.99.native.o"}},
	}
	want := []string{"clang", "-c", "t1.o", "-fthinlto-index=t1.1.99.native.o.thinlto.bc", "-o", "t1.1.99.native.o"}
	if got := a.Command(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Command() = %q, want %q", got, want)
	}
	got := a.Argv(func(i int) string { return []string{"m", "s"}[i] }, func(int) string { return "/stage/o" })
	want = []string{"clang", "-c", "m", "-fthinlto-index=s", "-o", "/stage/o"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Argv() = %q, want %q", got, want)
	}
}

func TestShellQuote(t *testing.T) {
	got := ShellQuote([]string{"clang", "lib.a(m.o at 88).1.2F3A.o", "it's", "", "-fx=a/b"})
	want := `clang 'lib.a(m.o at 88).1.2F3A.o' 'it'\''s' '' -fx=a/b`
	if got != want {
		t.Fatalf("ShellQuote = %s, want %s", got, want)
	}
}

func TestLayoutNestsWorkDirForParentPaths(t *testing.T) {
	a := &Action{Inputs: []Input{
		{Path: "../x/../y.o"}, {Path: "sub/../../z.o"}, {Path: "m.o"}, {Path: "../../p.prof"},
	}}
	l, err := a.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.WorkDir != "w/w" {
		t.Fatalf("WorkDir = %q, want w/w", l.WorkDir)
	}
	var files []string
	for _, f := range l.Files {
		files = append(files, f.RootPath)
	}
	// Files land where the OS resolves each spelling from w/w.
	want := map[string]bool{"w/y.o": true, "w/z.o": true, "w/w/m.o": true, "p.prof": true}
	for _, f := range files {
		if !want[f] {
			t.Errorf("unexpected file %q in %q", f, files)
		}
		delete(want, f)
	}
	if len(want) != 0 {
		t.Errorf("missing files %v", want)
	}
	if !reflect.DeepEqual(l.Dirs, []string{"w/w/sub", "w/x"}) {
		t.Errorf("Dirs = %q", l.Dirs)
	}
}

func TestLayoutRejectsAbsolute(t *testing.T) {
	a := &Action{Inputs: []Input{{Path: "/tmp/m.o"}}}
	if _, err := a.Layout(); err == nil {
		t.Fatal("absolute input accepted")
	}
}

func TestLayoutConflict(t *testing.T) {
	a := &Action{ID: "x", Inputs: []Input{{Path: "a.o", Source: "1.o"}, {Path: "./a.o", Source: "2.o"}}}
	if _, err := a.Layout(); err == nil {
		t.Fatal("two sources on one path accepted")
	}
}

func TestLocalLayoutLeavesAbsoluteInputsInPlace(t *testing.T) {
	a := &Action{Inputs: []Input{{Path: "lib.a(m.o at 8)", Source: "m.1.o"}, {Path: "/abs/prof.txt"}}}
	l, err := a.LocalLayout()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0].RootPath != "lib.a(m.o at 8)" {
		t.Fatalf("Files = %+v", l.Files)
	}
	a.Inputs = append(a.Inputs, Input{Path: "/abs/id.o", Source: "x.o"})
	if _, err := a.LocalLayout(); err == nil {
		t.Fatal("an absolute identifier with content elsewhere was accepted")
	}
}

// memberNameReference is the definition ModuleName parses by hand:
// "lib.a(m.o at 88)", optionally followed by lld's ".<seq>.<HEXPID>.o".
var memberNameReference = regexp.MustCompile(`^(.*)\((.*) at [0-9]+\)(\.[0-9]+\.[0-9A-Fa-f]+\.o)?$`)

// TestModuleNameMatchesReference: on names built from the pieces that
// matter (parentheses, " at ", digits, hex, dots, newlines), ModuleName
// agrees with the regular expression it replaced.
func TestModuleNameMatchesReference(t *testing.T) {
	pieces := []string{"lib", ".a", "(", ")", " at ", "0", "17", "8", ".", ".o", "E", "f", "g", " ", "\n", "/", "x.o"}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200000; n++ {
		var b strings.Builder
		for k := rng.IntN(12); k >= 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := b.String()
		want := in
		if m := memberNameReference.FindStringSubmatch(in); m != nil {
			want = m[1] + "(" + m[2] + ")"
		}
		if got := ModuleName(in); got != want {
			t.Fatalf("ModuleName(%q) = %q, the expression gives %q", in, got, want)
		}
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"libutil.a(checksum.o at 17600).8.247E.o": "libutil.a(checksum.o)",
		"out/libb.a(b.o at 84).2.4C22.o":          "out/libb.a(b.o)",
		"lib/libutil.a(checksum.o at 17600)":      "lib/libutil.a(checksum.o)",
		"lib/libutil.a(checksum.o)":               "lib/libutil.a(checksum.o)",
		"obj/main.o":                              "obj/main.o",
		"/tmp/a (b at 1).o":                       "/tmp/a (b at 1).o",
	} {
		if got := ModuleName(in); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", in, got, want)
		}
	}
}
