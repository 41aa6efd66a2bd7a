package thinlink

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

func TestResponseFileRoundTrip(t *testing.T) {
	args := []string{"plain", "with space", `quo"te`, `back\slash`, "", "it's", "tab\there", "lib.a(m.o at 88)"}
	p := filepath.Join(t.TempDir(), "x.rsp")
	if err := writeResponseFile(p, args); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if got := tokenizeGNU(string(data)); !reflect.DeepEqual(got, args) {
		t.Fatalf("round trip: got %q, want %q", got, args)
	}
	if got := tokenizeGNU(`a 'b c' "d\"e" f\ g`); !reflect.DeepEqual(got, []string{"a", "b c", `d"e`, "f g"}) {
		t.Fatalf("tokenizeGNU = %q", got)
	}
}

func TestExpandNestedResponseFiles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "inner.rsp"), []byte("c.o\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "outer.rsp"), []byte("b.o @inner.rsp\n"), 0o644)
	os.Rename(filepath.Join(dir, "outer.rsp"), filepath.Join(dir, "sub", "outer.rsp"))
	got, err := expandResponseFiles([]string{"clang", "a.o", "@sub/outer.rsp", "@missing.rsp"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"clang", "a.o", "b.o", "c.o", "@missing.rsp"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseLinkLine(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "L"), 0o755)
	os.WriteFile(filepath.Join(dir, "L", "libx.a"), []byte("!<arch>\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "L", "liby.so"), []byte("\x7fELF"), 0o644)
	os.WriteFile(filepath.Join(dir, "L", "liby.a"), []byte("!<arch>\n"), 0o644)
	l, err := parseLinkLine([]string{"clang++", "-O3", "-fuse-ld=lld", "a.o", "-Wl,-rpath,/opt/lib,--whole-archive,w.a,--no-whole-archive",
		"-Xlinker", "-soname", "-Xlinker", "libq.so", "-lx", "-ly", "-Wl,-Bstatic", "-ly", "-L", "L", "-x", "c",
		"-Wl,--start-lib", "lazy.o", "-Wl,--end-lib", "-oapp", "-Wl,-z,now", "-T", "script.ld", "-shared"}, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	var inputs, libs []string
	for _, it := range l.items {
		switch it.kind {
		case itInput:
			tag := it.path
			if it.whole {
				tag += "(whole)"
			}
			if it.lazy {
				tag += "(lazy)"
			}
			inputs = append(inputs, tag)
		case itLib:
			libs = append(libs, it.lib+"="+it.path)
		}
	}
	if want := []string{"a.o", "w.a(whole)", "lazy.o(lazy)"}; !reflect.DeepEqual(inputs, want) {
		t.Errorf("inputs = %q, want %q (option values such as /opt/lib, libq.so, now, script.ld are not inputs)", inputs, want)
	}
	if want := []string{"x=L/libx.a", "y=L/liby.so", "y=L/liby.a"}; !reflect.DeepEqual(libs, want) {
		t.Errorf("libs = %q, want %q", libs, want)
	}
	if l.output != "app" || !l.shared {
		t.Errorf("output %q shared %v", l.output, l.shared)
	}
	flags, extra, _ := l.backendFlags()
	flags = append(flags, extra...)
	if want := []string{"-O3", "-faddrsig", "-ffunction-sections", "-fdata-sections"}; !reflect.DeepEqual(flags, want) {
		t.Errorf("backend flags = %q, want %q", flags, want)
	}
}

func TestBackendFlagsFollowTheLink(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"clang", "-fuse-ld=lld", "--target=x86_64-linux-gnu", "-m32"}, []string{"-O2", "-faddrsig", "-ffunction-sections", "-fdata-sections"}},
		{[]string{"clang", "-Os", "-no-pie", "-march=x86-64-v3"}, []string{"-O2", "-faddrsig", "-ffunction-sections", "-fdata-sections", "-march=x86-64-v3"}},
		// The driver does not pass its -mllvm to the linker; lld applies its own.
		{[]string{"clang", "-O0", "-r", "-mllvm", "-x=1"}, []string{"-O0", "-faddrsig", "-ffunction-sections", "-fdata-sections"}},
		{[]string{"clang", "-Wl,-mllvm,-x=1", "-Xlinker", "--mllvm=-y=2"}, []string{"-O2", "-faddrsig", "-ffunction-sections", "-fdata-sections",
			"-mllvm", "-x=1", "-mllvm", "-y=2"}},
		{[]string{"clang", "-Ofast", "-static", "-fprofile-sample-use=p.prof"}, []string{"-O3", "-faddrsig", "-ffunction-sections", "-fdata-sections"}},
		{[]string{"clang", "-O1", "-Wl,--lto-O3,--plugin-opt=mcpu=znver3"}, []string{"-O3", "-faddrsig", "-ffunction-sections", "-fdata-sections", "-Xclang", "-target-cpu", "-Xclang", "znver3"}},
	} {
		l, _ := parseLinkLine(c.args, t.TempDir(), false)
		got, extra, profiles := l.backendFlags()
		got = append(got, extra...)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: flags %q, want %q", c.args, got, c.want)
		}
		if strings.Contains(strings.Join(c.args, " "), "sample") != (len(profiles) == 1) {
			t.Errorf("%q: profiles %q", c.args, profiles)
		}
	}
}

// TestRelocModel follows lld's createConfig: the linker's own options decide.
func TestRelocModel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want relocModel
	}{
		{[]string{"ld.lld", "a.o"}, relocStatic},
		{[]string{"ld.lld", "-pie", "a.o"}, relocPIC},
		{[]string{"ld.lld", "--pie", "--no-pie", "a.o"}, relocStatic},
		{[]string{"ld.lld", "--pic-executable", "a.o"}, relocPIC},
		{[]string{"ld.lld", "-shared", "a.o"}, relocPIC},
		{[]string{"ld.lld", "-r", "-pie", "a.o"}, relocOfModule},
		{[]string{"ld.lld", "--relocatable", "a.o"}, relocOfModule},
		{[]string{"ld.lld", "-static", "-pie", "a.o"}, relocPIC}, // -static-pie
	} {
		l, err := parseLinkLine(c.args, t.TempDir(), true)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.relocModel(); got != c.want {
			t.Errorf("%q: %v, want %v", c.args, got, c.want)
		}
	}
}

// TestGroupKeepsLazyFilesOutside: lld refuses --start-lib inside
// --start-group, so lazy files close and reopen the user's group.
func TestGroupKeepsLazyFilesOutside(t *testing.T) {
	l, err := parseLinkLine([]string{"ld.lld", "a.o", "--start-group", "x.a", "-(", "y.a", "-)", "--end-group", "z.a"}, t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	var groups []bool
	for _, it := range l.items {
		if it.kind == itInput {
			groups = append(groups, it.group)
		}
	}
	if want := []bool{false, true, true, false}; !reflect.DeepEqual(groups, want) {
		t.Errorf("in a group: %v, want %v", groups, want)
	}
	got := group(item{group: true}, []string{"p.o"}, []string{"m1.o", "m2.o"})
	want := []string{"p.o", "--end-group", "--start-lib", "m1.o", "m2.o", "--end-lib", "--start-group"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("group: %q, want %q", got, want)
	}
}

func TestSplitDriverJob(t *testing.T) {
	got := splitDriverJob(` "/usr/bin/ld.lld" "-pie" "a b.o" "q\"x" "\$y" "c\\d"`)
	want := []string{"/usr/bin/ld.lld", "-pie", "a b.o", `q"x`, "$y", `c\d`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFrontendFiltered(t *testing.T) {
	in := []string{"clang", "-O2", "-flto=thin", "-DX=1", "-D", "Y", "-UZ", "-Iinc", "-I", "inc2", "-isystem", "/s",
		"-include", "pre.h", "-Wp,-MD,x.d", "-MD", "-MF", "x.d", "-MT", "x.o", "-c", "-o", "x.o", "src/x.c", "-x", "c",
		"-std=c11", "-Wall", "-Werror", "-Wa,--noexecstack", "-fno-unroll-loops", "-fno-vectorize", "-march=native",
		"-g", "-fPIC", "-mllvm", "-inline-threshold=10", "-fprofile-instr-use=x.profdata", "-fprofile-sample-use=s.prof",
		"-falign-loops=1", "-gsplit-dwarf", "-fcolor-diagnostics"}
	got := frontendFiltered(in)
	want := []string{"-O2", "-Wa,--noexecstack", "-fno-unroll-loops", "-fno-vectorize", "-march=native", "-g", "-fPIC",
		"-mllvm", "-inline-threshold=10", "-fprofile-sample-use=s.prof", "-falign-loops=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestSplitShell(t *testing.T) {
	got := splitShell(`cc -DX="a b" 'q r' s\ t -c x.c`)
	want := []string{"cc", "-DX=a b", "q r", "s t", "-c", "x.c"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestMangleAndUpLevels(t *testing.T) {
	for in, want := range map[string]string{"/a/b.o": "a/b.o", "../x/b.o": "__/x/b.o", "a/./c/../d.o": "a/d.o", "lib.a": "lib.a"} {
		if got := mangle(in); got != want {
			t.Errorf("mangle(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int{"a.o": 0, "../a.o": 1, "x/../../../a.o": 2, "/abs/../a.o": 0} {
		if got := action.UpLevels(in); got != want {
			t.Errorf("UpLevels(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestHint(t *testing.T) {
	out := "ld.lld: error: unknown argument '--why-extract=x.txt', did you mean '--thinlto-index-only'\n"
	h := hint(out)
	if !strings.Contains(h, "--why-extract") || strings.Contains(h, "--thinlto-index-only") {
		t.Fatalf("hint = %q", h)
	}
	if hint("ld.lld: error: undefined symbol: f\n") != "" {
		t.Fatalf("hint for an unrelated error")
	}
}

// TestReadArchive checks the reader against llvm-ar's GNU archives with
// long names, regular and thin, and a BSD archive.
func TestReadArchive(t *testing.T) {
	testprog.NeedLLVM(t, testprog.LLVMBin(), "llvm-ar")
	ar := filepath.Join(testprog.LLVMBin(), "llvm-ar")
	dir := t.TempDir()
	long := "a_member_with_a_name_longer_than_sixteen.o"
	os.WriteFile(filepath.Join(dir, long), []byte("BC\xc0\xde rest"), 0o644)
	os.WriteFile(filepath.Join(dir, "n.o"), []byte("\x7fELF native"), 0o644)
	os.WriteFile(filepath.Join(dir, "w.o"), []byte("\xde\xc0\x17\x0b wrapped"), 0o644)
	for _, c := range []struct{ name, flags string }{
		{"gnu.a", "rcs"}, {"thin.a", "rcsT"}, {"bsd.a", "rcs --format=bsd"},
	} {
		args := append(strings.Fields(c.flags), c.name, long, "n.o", "w.o")
		cmd := exec.Command(ar, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("llvm-ar %v: %v\n%s", args, err, out)
		}
		a, err := readArchive(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var names []string
		var bc []bool
		for _, m := range a.Members {
			names = append(names, m.Name)
			bc = append(bc, m.Bitcode)
			if !a.Thin {
				want, _ := os.ReadFile(filepath.Join(dir, m.Name))
				if string(m.Data) != string(want) {
					t.Errorf("%s(%s): data %q", c.name, m.Name, m.Data)
				}
			}
		}
		if !reflect.DeepEqual(names, []string{long, "n.o", "w.o"}) || !reflect.DeepEqual(bc, []bool{true, false, true}) {
			t.Errorf("%s: members %q bitcode %v", c.name, names, bc)
		}
		if a.Thin != (c.name == "thin.a") {
			t.Errorf("%s: thin = %v", c.name, a.Thin)
		}
	}
}

// TestDepFileEscapes: file names as lld's dependency file writes them
// ('#' and ' ' after a backslash, the backslashes before a space doubled,
// '$' doubled) read back as they were.
func TestDepFileEscapes(t *testing.T) {
	for name, escaped := range map[string]string{
		"lib.a(m.o at 88).o": `lib.a(m.o\ at\ 88).o`,
		"a#b$c.o":            `a\#b$$c.o`,
		`dir\ x.o`:           `dir\\\ x.o`,
		`back\slash.o`:       `back\slash.o`,
	} {
		if got := escapeDep(name); got != escaped {
			t.Errorf("escapeDep(%q) = %q, want %q", name, got, escaped)
		}
		if got := unescapeDep(escaped); got != name {
			t.Errorf("unescapeDep(%q) = %q, want %q", escaped, got, name)
		}
	}
}

// TestCodegenNote: the links whose code clang's backends cannot make as lld
// in-process does (its code generator at a level of its own) are named.
func TestCodegenNote(t *testing.T) {
	for _, c := range []struct {
		args []string
		note bool
	}{
		{[]string{"clang", "-flto=thin", "a.o"}, false},
		{[]string{"clang", "-O1", "a.o"}, false},
		{[]string{"clang", "-Wl,-O0", "a.o"}, false},
		{[]string{"clang", "-O3", "a.o"}, false},
		{[]string{"clang", "-O0", "a.o"}, true},
		{[]string{"clang", "-Wl,--lto-O0", "a.o"}, true},
		{[]string{"clang", "-O0", "-Wl,--lto-CGO0", "a.o"}, false},
		{[]string{"clang", "-Wl,--lto-CGO3", "a.o"}, true},
		{[]string{"clang", "-O3", "-Wl,--lto-CGO3", "a.o"}, false},
		{[]string{"clang", "-O1", "-Wl,--lto-CGO2", "a.o"}, true},
	} {
		l, _ := parseLinkLine(c.args, t.TempDir(), false)
		flags, _, _ := l.backendFlags()
		if got := l.codegenNote(flags[0]); (got != "") != c.note {
			t.Errorf("%q: note %q, want one: %v", c.args, got, c.note)
		}
	}
}
