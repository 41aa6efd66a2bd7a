package thinlink_test

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/source/thinlink"
)

// TestLinkProgram links the generated program with `thindist link` and with
// in-process ThinLTO, on LLVM 19 and 22, and compares what the binaries print.
func TestLinkProgram(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		os.MkdirAll(filepath.Join(p.dir, "ref-objs"), 0o755)
		run(t, p.dir, nil, append(p.mainLink("ref"), "-Wl,--lto-obj-path=ref-objs/lto")...)
		ref := run(t, p.dir, nil, "./ref")
		mustEqual(t, "in-process ThinLTO build's output", ref, wantMain)

		res := p.mustLink(t, p.mainLink("app"), keepKept)
		mustEqual(t, "thindist link build's output", run(t, p.dir, nil, "./app"), ref)

		sameAsInProcess(t, p, "ref-objs", res)

		var got []string
		for _, m := range res.Modules {
			got = append(got, m.Display)
		}
		slices.Sort(got)
		want := []string{filepath.Join(p.dir, "obj/dead.o"), "lib/liba.a(a1.o)", "lib/liba.a(a3.o)", "lib/libt.a(../obj/t1.o)",
			"lib/libw.a(w1.o)", "obj/cls.o", "obj/core.o", "obj/main.o", "obj/nv.o", "sub/../obj/hot.o"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("modules compiled:\n got  %q\n want %q (unused archive members and non-bitcode objects excluded)", got, want)
		}
		for _, a := range res.Actions {
			if a.Inputs[0].Role != action.RoleModule || a.Inputs[1].Role != action.RoleIndex {
				t.Errorf("%s: inputs %v", a.ID, a.Inputs)
			}
			// Absolute object paths are given to lld relative to the
			// link's directory, so every action can run remotely.
			if _, err := a.Layout(); err != nil {
				t.Errorf("%s: no input root layout: %v", a.ID, err)
			}
		}
		if fileExists(filepath.Join(p.dir, "app.thindist.d")) {
			t.Errorf("the work directory was not removed")
		}
	})
}

// TestLinkRenderings checks the thin and final link commands: archive
// semantics kept with --start-lib/--end-lib, --whole-archive members plain,
// non-bitcode inputs untouched.
func TestLinkRenderings(t *testing.T) {
	tc := toolchains(t)[0]
	p := newProject(t, tc)
	res := p.mustLink(t, p.mainLink("app"), func(o *thinlink.Options) { o.KeepWorkDir = true })
	work := filepath.Join(p.dir, res.WorkDir)
	if !fileExists(work) {
		t.Fatalf("--keep-work-dir: %s is gone", work)
	}
	final := readRsp(t, filepath.Join(p.dir, strings.TrimPrefix(res.Final[1], "@")))
	thin := readRsp(t, filepath.Join(p.dir, strings.TrimPrefix(res.ThinLink[1], "@")))
	joined := strings.Join(final, " ")
	for _, s := range []string{"obj/asm.o", "obj/nolto.o", "-Xlinker --whole-archive", "-Xlinker --no-whole-archive", "-O2", "-o app"} {
		if !strings.Contains(joined, s) {
			t.Errorf("final link lacks %q: %s", s, joined)
		}
	}
	for _, s := range []string{"obj/main.o", "obj/core.o", "lib/liba.a", "lib/libt.a", "lib/libw.a", "-la", "--thinlto"} {
		if slices.Contains(final, s) || strings.Contains(joined, "--thinlto") {
			t.Errorf("final link still names %q: %s", s, joined)
		}
	}
	// What the thin link extracted is linked as plain objects; what it did
	// not stays lazy (liba's unused native member an2.o) or, for bitcode,
	// is dropped.
	if n := strings.Count(joined, "-Xlinker --start-lib"); n != 1 ||
		!regexp.MustCompile(`-Xlinker --start-lib -Xlinker app\.thindist\.d/ar/\d+/an2\.o -Xlinker --end-lib`).MatchString(joined) {
		t.Errorf("final link should have one --start-lib group, holding an2.o: %s", joined)
	}
	if !strings.Contains(joined, "app.thindist.d/forced/") || !strings.Contains(joined, "/n.o -Xlinker -ln") {
		t.Errorf("final link should link libn.a's extracted member n.o before -ln: %s", joined)
	}
	thinJoined := strings.Join(thin, " ")
	if n := strings.Count(thinJoined, "-Xlinker --start-lib"); n != 2 {
		t.Errorf("thin link has %d --start-lib groups, want 2: %s", n, thinJoined)
	}
	// Every module is passed under the name lld gives it in-process, in
	// the work directory, where it is the module's file (see names.go).
	members := regexp.MustCompile(`-Xlinker (app\.thindist\.d/m/lib/libt\.a\(t1\.o at \d+\)\.o) -Xlinker (app\.thindist\.d/m/lib/libt\.a\(t2\.o at \d+\)\.o)`).FindStringSubmatch(thinJoined)
	if members == nil || !strings.Contains(thinJoined, "-Xlinker app.thindist.d/m/obj/main.o ") {
		t.Fatalf("modules not passed under lld's names for them: %s", thinJoined)
	}
	for name, file := range map[string]string{members[1]: "obj/t1.o", members[2]: "obj/t2.o", "app.thindist.d/m/obj/main.o": "obj/main.o"} {
		got, _ := os.ReadFile(filepath.Join(p.dir, name))
		want, _ := os.ReadFile(filepath.Join(p.dir, file))
		if len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("%s does not hold %s", name, file)
		}
	}
	os.RemoveAll(work)
}

func readRsp(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		l = strings.TrimSuffix(strings.TrimPrefix(l, `"`), `"`)
		out = append(out, strings.ReplaceAll(strings.ReplaceAll(l, `\"`, `"`), `\\`, `\`))
	}
	return out
}

// TestLinkSharedAndRelocatable links a shared library and a relocatable
// object with `thindist link` and uses them, against in-process ThinLTO.
func TestLinkSharedAndRelocatable(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		cc := tc.tool("clang")
		env := []string{"LD_LIBRARY_PATH=" + filepath.Join(p.dir, "tl")}
		os.MkdirAll(filepath.Join(p.dir, "tl"), 0o755)
		os.MkdirAll(filepath.Join(p.dir, "ip"), 0o755)

		// -shared
		// with a version script (an option value that is a file but no
		// input) and an implicit linker script as an input.
		os.WriteFile(filepath.Join(p.dir, "exports.map"), []byte("{ global: f_shared; local: *; };\n"), 0o644)
		os.WriteFile(filepath.Join(p.dir, "s2.ld"), []byte("INPUT(obj/s2n.o)\n"), 0o644)
		run(t, p.dir, nil, cc, "-O2", "-fPIC", "-c", "src/s2.c", "-o", "obj/s2n.o")
		so := []string{cc, "-O2", "-flto=thin", "-fuse-ld=lld", "-shared", "-Wl,--version-script,exports.map",
			"obj/s1.o", "s2.ld", "-o"}
		os.MkdirAll(filepath.Join(p.dir, "ip/so-objs"), 0o755)
		run(t, p.dir, nil, append(so, "ip/libs.so", "-Wl,--lto-obj-path=ip/so-objs/lto")...)
		sameAsInProcess(t, p, "ip/so-objs", p.mustLink(t, append(so, "tl/libs.so"), keepKept))
		f, err := elf.Open(filepath.Join(p.dir, "tl/libs.so"))
		if err != nil || f.Type != elf.ET_DYN {
			t.Fatalf("tl/libs.so is not a shared library: %v", err)
		}
		dyn, _ := f.DynamicSymbols()
		var exported []string
		for _, s := range dyn {
			if s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
				exported = append(exported, s.Name)
			}
		}
		if !slices.Equal(exported, []string{"f_shared"}) {
			t.Errorf("tl/libs.so exports %q, want only f_shared (the version script)", exported)
		}
		user := []string{cc, "-O2", "-flto=thin", "-fuse-ld=lld", "obj/mainso.o", "-Ltl", "-ls", "-o", "tl/appso"}
		p.mustLink(t, user, nil)
		mustEqual(t, "program using the shared library", run(t, p.dir, env, "tl/appso"), wantSO)
		run(t, p.dir, nil, cc, "-O2", "-flto=thin", "-fuse-ld=lld", "obj/mainso.o", "-Lip", "-ls", "-o", "ip/appso")
		mustEqual(t, "in-process build", run(t, p.dir, []string{"LD_LIBRARY_PATH=" + filepath.Join(p.dir, "ip")}, "ip/appso"), wantSO)

		// -r
		rel := []string{cc, "-O2", "-flto=thin", "-fuse-ld=lld", "-r", "obj/r1.o", "obj/r2.o", "-o"}
		os.MkdirAll(filepath.Join(p.dir, "ip/r-objs"), 0o755)
		run(t, p.dir, nil, append(rel, "ip/rel-objs.o", "-Wl,--lto-obj-path=ip/r-objs/lto")...)
		sameAsInProcess(t, p, "ip/r-objs", p.mustLink(t, append(rel, "tl/rel.o"), keepKept))
		f, err = elf.Open(filepath.Join(p.dir, "tl/rel.o"))
		if err != nil || f.Type != elf.ET_REL {
			t.Fatalf("tl/rel.o is not a relocatable ELF object: %v", err)
		}
		syms, _ := f.Symbols()
		if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == "f_rel" && s.Section != elf.SHN_UNDEF }) {
			t.Fatalf("tl/rel.o does not define f_rel: %v", syms)
		}
		run(t, p.dir, nil, cc, "-O2", "-flto=thin", "-fuse-ld=lld", "obj/mainr.o", "tl/rel.o", "-o", "tl/appr")
		run(t, p.dir, nil, append(rel, "ip/rel.o")...)
		run(t, p.dir, nil, cc, "-O2", "-flto=thin", "-fuse-ld=lld", "obj/mainr.o", "ip/rel.o", "-o", "ip/appr")
		mustEqual(t, "program using the -r object", run(t, p.dir, nil, "tl/appr"), run(t, p.dir, nil, "ip/appr"))
		mustEqual(t, "program using the -r object", run(t, p.dir, nil, "tl/appr"), wantRel)
	})
}

// TestPerModuleOptions: with --compdb, a module whose compile command adds
// -fno-unroll-loops -fno-vectorize gets a smaller native object, and every
// other module's object stays byte-identical.
func TestPerModuleOptions(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		dbPath := filepath.Join(p.dir, "compile_commands.json")
		db, err := thinlink.LoadCompDB(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		lr, err := p.link(t, p.mainLink("app-a"), func(o *thinlink.Options) {
			o.CompDB = db
			o.KeepNativeObjects = "keep-a"
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, lr.stderr)
		}
		// Every module matches its compile command (by -o, through "..",
		// an absolute path, a thin archive, a regular archive's member).
		if strings.Contains(lr.stderr, "no compile command") {
			t.Errorf("modules without a compile command:\n%s", lr.stderr)
		}
		mustEqual(t, "--compdb build's output", run(t, p.dir, nil, "./app-a"), wantMain)

		// The same database, but the hot loop's module not unrolled or vectorised.
		var entries []map[string]any
		data, _ := os.ReadFile(dbPath)
		json.Unmarshal(data, &entries)
		changed := 0
		for _, e := range entries {
			if e["file"] == "src/hot.c" {
				e["arguments"] = append(e["arguments"].([]any), "-fno-unroll-loops", "-fno-vectorize")
				changed++
			}
		}
		if changed != 1 {
			t.Fatalf("hot.c not in the database")
		}
		data, _ = json.Marshal(entries)
		os.WriteFile(filepath.Join(p.dir, "compdb-b.json"), data, 0o644)
		dbB, err := thinlink.LoadCompDB(filepath.Join(p.dir, "compdb-b.json"))
		if err != nil {
			t.Fatal(err)
		}
		p.mustLink(t, p.mainLink("app-b"), func(o *thinlink.Options) {
			o.CompDB = dbB
			o.KeepNativeObjects = "keep-b"
		})
		mustEqual(t, "--compdb build's output", run(t, p.dir, nil, "./app-b"), wantMain)

		var names []string
		filepath.WalkDir(filepath.Join(p.dir, "keep-a"), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				r, _ := filepath.Rel(filepath.Join(p.dir, "keep-a"), path)
				names = append(names, r)
			}
			return nil
		})
		slices.Sort(names)
		wantNames := []string{"lib/liba.a/a1.o", "lib/liba.a/a3.o", "lib/libw.a/w1.o", "obj/nv.o", "obj/cls.o", "obj/core.o", "obj/hot.o",
			"obj/main.o", "obj/t1.o", strings.TrimPrefix(filepath.Join(p.dir, "obj/dead.o"), "/")}
		slices.Sort(wantNames)
		if !slices.Equal(names, wantNames) {
			t.Fatalf("--keep-native-objects names:\n got  %q\n want %q", names, wantNames)
		}
		for _, n := range names {
			a, _ := os.ReadFile(filepath.Join(p.dir, "keep-a", n))
			b, err := os.ReadFile(filepath.Join(p.dir, "keep-b", n))
			if err != nil {
				t.Fatal(err)
			}
			if n == "obj/hot.o" {
				t.Logf("hot.o: %d bytes with the link's options, %d with -fno-unroll-loops -fno-vectorize", len(a), len(b))
				if len(b) >= len(a) {
					t.Errorf("hot.o with -fno-unroll-loops -fno-vectorize is %d bytes, not smaller than %d", len(b), len(a))
				}
				continue
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s changed although its compile command did not", n)
			}
		}
		// Without per-module options the hot loop is vectorised too.
		p.mustLink(t, p.mainLink("app-c"), func(o *thinlink.Options) { o.KeepNativeObjects = "keep-c" })
		c, _ := os.ReadFile(filepath.Join(p.dir, "keep-c/obj/hot.o"))
		b, _ := os.ReadFile(filepath.Join(p.dir, "keep-b/obj/hot.o"))
		if len(c) <= len(b) {
			t.Errorf("hot.o without --compdb is %d bytes, not larger than the -fno-unroll-loops one (%d)", len(c), len(b))
		}
	})
}

// TestLinkErrors: bad input yields the linker's own message and what
// thindist was doing, and no work directory is left behind.
func TestLinkErrors(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		cxx := tc.tool("clang++")
		base := []string{cxx, "-O2", "-flto=thin", "-fuse-ld=lld"}
		// lld 22 links in one process, which reports both.
		thinStep, finalStep := "the thin link", "the final link"
		if tc.name == "llvm-22" {
			thinStep, finalStep = "the link (lld, with thindist as its DTLTO distributor)", "the link (lld"
		}
		cases := []struct {
			name string
			cmd  []string
			want []string
		}{
			{"no bitcode", append(base, "obj/asm.o", "obj/nolto.o", "-o", "e1"),
				[]string{"run unchanged: no input holds bitcode"}},
			{"missing archive", append(base, "obj/main.o", "obj/core.o", "lib/libmissing.a", "-o", "e2"),
				[]string{"lib/libmissing.a", "no such file"}},
			{"duplicate symbol", append(base, "obj/main.o", "obj/core.o", "-Llib", "-la", "-Wl,lib/libt.a", "obj/asm.o",
				"obj/nolto.o", "obj/hot.o", "obj/cls.o", "lib/libw.a", "obj/core.o", "-o", "e5"),
				[]string{thinStep, "duplicate symbol", "f_core"}},
			{"undefined symbol", append(base, "obj/main.o", "obj/cls.o", "-o", "e3"),
				[]string{finalStep, "undefined symbol", "f_core"}},
			{"not lld", []string{cxx, "-O2", "-flto=thin", "obj/main.o", "-o", "e4"},
				[]string{"needs lld", "-fuse-ld=lld"}},
		}
		for _, c := range cases {
			lr, err := p.link(t, c.cmd, nil)
			if err == nil {
				t.Errorf("%s: no error", c.name)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error lacks %q:\n%v\n%s", c.name, w, err, lr.stderr)
				}
			}
			out := c.cmd[len(c.cmd)-1]
			if fileExists(filepath.Join(p.dir, out+".thindist.d")) || fileExists(filepath.Join(p.dir, out)) {
				t.Errorf("%s: left the work directory or an output behind", c.name)
			}
		}
	})
}

// TestLinkFromSubdir links with every module named through "..": lld writes
// shards under the prefix-replaced module paths, and thindist nests its
// work directory so that none lands outside it.
func TestLinkFromSubdir(t *testing.T) {
	tc := toolchains(t)[len(toolchains(t))-1]
	p := newProject(t, tc)
	before := listFiles(t, p.dir)
	sub := filepath.Join(p.dir, "sub")
	cmd := []string{tc.tool("clang++"), "-O2", "-flto=thin", "-fuse-ld=lld", "../obj/main.o", "../obj/core.o", "../obj/cls.o",
		"../lib/libw.a", "-L../lib", "-la", "-ln", "../obj/nv.o", "../lib/libt.a", "../obj/asm.o", "../obj/nolto.o", "../obj/hot.o",
		"-Wl,--whole-archive", "../lib/libw.a", "-Wl,--no-whole-archive", "-o", "app"}
	var stderr strings.Builder
	opts := func(o *thinlink.Options) { o.Dir = sub; o.Stderr = &stderr; o.KeepWorkDir = true }
	res := p.mustLink(t, cmd, opts)
	mustEqual(t, "output", run(t, sub, nil, "./app"), wantMain)
	// Each action, run in a private input root laid out as a remote worker
	// would (its inputs copied at their relative paths), writes the very
	// object the local run wrote.
	for i, a := range res.Actions {
		l, err := a.Layout()
		if err != nil {
			t.Errorf("%s: no remote layout: %v", a.ID, err)
			continue
		}
		root := t.TempDir()
		for _, d := range l.Dirs {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		for _, f := range l.Files {
			data, err := os.ReadFile(a.Abs(a.Inputs[f.Input].Local()))
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(filepath.Join(root, f.RootPath)), 0o755)
			os.WriteFile(filepath.Join(root, f.RootPath), data, 0o644)
		}
		wd := filepath.Join(root, l.WorkDir)
		os.MkdirAll(wd, 0o755)
		out := fmt.Sprintf("out%d.o", i)
		argv := a.Argv(func(i int) string { return a.Inputs[i].Path }, func(int) string { return out })
		run(t, wd, nil, argv...)
		got, _ := os.ReadFile(filepath.Join(wd, out))
		want, _ := os.ReadFile(a.Abs(a.Outputs[0].Path))
		if len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("%s: the object built in an input root differs from the local one (%d vs %d bytes)", a.ID, len(got), len(want))
		}
	}
	os.RemoveAll(filepath.Join(sub, res.WorkDir))
	after := listFiles(t, p.dir)
	for f := range after {
		if !before[f] && f != "sub/app" {
			t.Errorf("thindist link left %s behind", f)
		}
	}
}

func listFiles(t *testing.T, dir string) map[string]bool {
	files := map[string]bool{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, path)
			files[r] = true
		}
		return nil
	})
	return files
}

// TestModulePathMismatch: a module lld recorded under a path thindist did
// not give it (here through a linker script) is an error, not an object
// silently compiled from nothing.
func TestModulePathMismatch(t *testing.T) {
	tc := toolchains(t)[0]
	p := newProject(t, tc)
	os.WriteFile(filepath.Join(p.dir, "extra.ld"), []byte("INPUT(obj/core.o)\n"), 0o644)
	cmd := []string{tc.tool("clang++"), "-O2", "-flto=thin", "-fuse-ld=lld", "obj/main.o", "extra.ld", "obj/cls.o",
		"-Llib", "-la", "lib/libt.a", "obj/asm.o", "obj/nolto.o", "obj/hot.o", "-o", "app"}
	lr, err := p.link(t, cmd, nil)
	if err == nil || !strings.Contains(err.Error(), `not a module thindist put on the link line under that path`) ||
		!strings.Contains(err.Error(), "obj/core.o") {
		t.Fatalf("want a module path error naming obj/core.o, got %v\n%s", err, lr.stderr)
	}
}

// TestBackendFailure: a failing backend stops the link, names the module
// and one way to run it again, and leaves neither the work directory nor
// an output behind.
func TestBackendFailure(t *testing.T) {
	tc := toolchains(t)[0]
	p := newProject(t, tc)
	db := `[{"directory": "` + p.dir + `", "file": "src/hot.c", "output": "obj/hot.o",
	  "arguments": ["clang", "-O2", "-fno-such-option-for-thindist", "-c", "src/hot.c", "-o", "obj/hot.o"]}]`
	os.WriteFile(filepath.Join(p.dir, "bad.json"), []byte(db), 0o644)
	cdb, err := thinlink.LoadCompDB(filepath.Join(p.dir, "bad.json"))
	if err != nil {
		t.Fatal(err)
	}
	lr, err := p.link(t, p.mainLink("app"), func(o *thinlink.Options) { o.CompDB = cdb })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"sub/../obj/hot.o", "-fno-such-option-for-thindist"} {
		if !strings.Contains(err.Error()+lr.stderr, want) {
			t.Errorf("error lacks %q:\n%v\n%s", want, err, lr.stderr)
		}
	}
	// One way to run the failed backend again: the kept inputs' script,
	// or else --keep-work-dir.
	if script, keep := strings.Contains(err.Error()+lr.stderr, "rerun.sh"), strings.Contains(lr.stderr, "--keep-work-dir"); script == keep {
		t.Errorf("want either a rerun script or a hint about --keep-work-dir (script %v, hint %v):\n%v\n%s", script, keep, err, lr.stderr)
	}
	if fileExists(filepath.Join(p.dir, "app")) || fileExists(filepath.Join(p.dir, "app.thindist.d")) {
		t.Errorf("left an output or the work directory behind")
	}
}

// TestDirectLLDRelocatable is the kernel's vmlinux.o link: ld.lld run by
// itself, -r, a thin archive under --whole-archive holding bitcode and an
// assembly object.
func TestDirectLLDRelocatable(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		cmd := []string{tc.tool("ld.lld"), "-m", "elf_x86_64", "-r", "-o", "OUT", "--whole-archive", "vmlinux.a", "--no-whole-archive"}
		out := func(o string) []string { c := slices.Clone(cmd); c[5] = o; return c }
		os.MkdirAll(filepath.Join(p.dir, "k-objs"), 0o755)
		run(t, p.dir, nil, append(out("ip.o"), "--lto-obj-path=k-objs/lto")...)
		res := p.mustLink(t, out("tl.o"), keepKept)
		sameAsInProcess(t, p, "k-objs", res)
		if len(res.Modules) != 2 {
			t.Errorf("compiled %d modules, want 2 (k1.o, k2.o)", len(res.Modules))
		}
		if !strings.HasSuffix(res.Actions[0].Command()[0], "/clang") {
			t.Errorf("backend compiler %q, want the clang beside ld.lld", res.Actions[0].Command()[0])
		}
		for _, o := range []string{"ip", "tl"} {
			run(t, p.dir, nil, tc.tool("clang"), "-fuse-ld=lld", "obj/maink.o", o+".o", "-o", o+"-k")
			mustEqual(t, o+" program", run(t, p.dir, nil, "./"+o+"-k"), wantK)
		}
	})
}

// TestActionsRepeat: two links of the same inputs produce the same actions,
// byte for byte (commands and every input), so a cache hits on the second.
func TestActionsRepeat(t *testing.T) {
	tc := toolchains(t)[0]
	p := newProject(t, tc)
	digest := func() []string {
		res := p.mustLink(t, p.mainLink("app"), func(o *thinlink.Options) { o.KeepWorkDir = true })
		defer os.RemoveAll(filepath.Join(p.dir, res.WorkDir))
		var out []string
		for _, a := range res.Actions {
			out = append(out, action.ShellQuote(a.Command()))
			for _, in := range a.Inputs {
				data, err := os.ReadFile(a.Abs(in.Local()))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, in.Path+"="+string(data))
			}
		}
		return out
	}
	first, second := digest(), digest()
	if len(first) == 0 || !slices.Equal(first, second) {
		t.Fatalf("the second link's actions differ from the first's")
	}
}

// TestUserStartLib: the user's own --start-lib group keeps its semantics;
// what the thin link extracted from it is linked in the final link even
// where the optimised code no longer refers to it (a3.o's constructor).
func TestUserStartLib(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		cmd := p.mainLink("app")
		i := slices.Index(cmd, "-la")
		cmd = slices.Replace(cmd, i, i+1, "-Wl,--start-lib", "obj/a1.o", "obj/an.o", "obj/a2.o", "obj/an2.o", "obj/a3.o", "-Wl,--end-lib")
		ref := slices.Clone(cmd)
		ref[len(ref)-1] = "ref"
		run(t, p.dir, nil, ref...)
		mustEqual(t, "in-process build", run(t, p.dir, nil, "./ref"), wantMain)
		p.mustLink(t, cmd, nil)
		mustEqual(t, "thindist link build", run(t, p.dir, nil, "./app"), wantMain)
	})
}

// sameAsInProcess: without --compdb the backends use what in-process ThinLTO
// uses, so every native object must be byte-identical to the one lld
// compiled in-process (its --lto-obj-path=DIR/lto writes them as lto1,
// lto2...). res must come from a link with KeepNativeObjects "kept".
func sameAsInProcess(t *testing.T, p *project, refDir string, res *thinlink.Result) {
	t.Helper()
	inProcess := map[string]int{}
	refObjs, _ := filepath.Glob(filepath.Join(p.dir, refDir, "lto[0-9]*"))
	for _, f := range refObjs {
		data, _ := os.ReadFile(f)
		inProcess[string(data)]++
	}
	if len(refObjs) != len(res.Modules) || len(refObjs) == 0 {
		t.Errorf("in-process ThinLTO compiled %d modules, thindist %d", len(refObjs), len(res.Modules))
	}
	for _, m := range res.Modules {
		data, _ := os.ReadFile(filepath.Join(p.dir, "kept", m.KeepName))
		if inProcess[string(data)] == 0 {
			t.Errorf("%s: the native object differs from every object of the in-process link", m.Display)
		}
		inProcess[string(data)]--
	}
	os.RemoveAll(filepath.Join(p.dir, "kept"))
}

func keepKept(o *thinlink.Options) { o.KeepNativeObjects = "kept" }

// TestArchivesGivenTwice: GNU-ld style link lines repeat archives; every
// object must still be linked once.
func TestArchivesGivenTwice(t *testing.T) {
	tc := toolchains(t)[len(toolchains(t))-1]
	p := newProject(t, tc)
	cmd := p.mainLink("app")
	cmd = slices.Insert(cmd, len(cmd)-2, "-la", "-Wl,@lt.rsp", "-ln", "lib/libt.a", "lib/liba.a")
	ref := slices.Clone(cmd)
	ref[len(ref)-1] = "ref"
	run(t, p.dir, nil, ref...)
	mustEqual(t, "in-process build", run(t, p.dir, nil, "./ref"), wantMain)
	p.mustLink(t, cmd, nil)
	mustEqual(t, "thindist link build", run(t, p.dir, nil, "./app"), wantMain)
}

// TestSecondLinkCompilesNothing: `thindist link` goes through the same
// executor chain as DTLTO, so a second link of the same inputs is served
// from the action cache and runs no backend; the binary is byte-identical.
func TestSecondLinkCompilesNothing(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		log := filepath.Join(p.dir, "compiles.log")
		wrapper := filepath.Join(p.dir, "clang-wrapper")
		script := fmt.Sprintf("#!/bin/sh\necho x >> %q\nexec %q \"$@\"\n", log, tc.tool("clang"))
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		useWrapper := func(o *thinlink.Options) { o.Compiler = wrapper }
		compiles := func() int {
			data, _ := os.ReadFile(log)
			return bytes.Count(data, []byte("x\n"))
		}
		first := p.mustLink(t, p.mainLink("app1"), useWrapper)
		n1 := compiles()
		if n1 != len(first.Actions) || n1 == 0 {
			t.Fatalf("first link: %d compiles for %d actions", n1, len(first.Actions))
		}
		p.mustLink(t, p.mainLink("app2"), useWrapper)
		if n2 := compiles() - n1; n2 != 0 {
			t.Errorf("second link ran the compiler %d times, want 0 (all cached)", n2)
		}
		a1, _ := os.ReadFile(filepath.Join(p.dir, "app1"))
		a2, _ := os.ReadFile(filepath.Join(p.dir, "app2"))
		if len(a1) == 0 || !bytes.Equal(a1, a2) {
			t.Errorf("the cached link's binary differs from the first")
		}
	})
}

// TestImportsMatchLLD: the imports thindist link reads from each shard's
// module table are exactly what lld writes with --thinlto-emit-imports-files
// (the thin link run again with that flag), for archives, thin archives and
// --whole-archive members, with lld 19 and 22.
func TestImportsMatchLLD(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		res := p.mustLink(t, p.mainLink("app"), func(o *thinlink.Options) { o.KeepWorkDir = true })
		cmd := append(slices.Clone(res.ThinLink), "-Xlinker", "--thinlto-emit-imports-files")
		run(t, p.dir, nil, cmd...)
		withImports := 0
		for _, a := range res.Actions {
			var shard string
			var got []string
			for _, in := range a.Inputs {
				switch in.Role {
				case action.RoleIndex:
					shard = in.Path
				case action.RoleImport:
					got = append(got, in.Path)
				}
			}
			data, err := os.ReadFile(filepath.Join(p.dir, strings.TrimSuffix(shard, ".thinlto.bc")+".imports"))
			if err != nil {
				t.Fatalf("%s: lld's imports file: %v", a.ID, err)
			}
			var want []string
			for _, l := range strings.Split(string(data), "\n") {
				if l != "" {
					want = append(want, l)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: imports %q, lld's imports file %q", a.ID, got, want)
			}
			if len(want) > 0 {
				withImports++
			}
		}
		// The project's modules call each other: the comparison must
		// not be vacuous.
		if withImports == 0 {
			t.Fatalf("no module imports anything; the test proves nothing")
		}
		t.Logf("%d of %d modules import from others; all match lld's imports files", withImports, len(res.Actions))
	})
}
