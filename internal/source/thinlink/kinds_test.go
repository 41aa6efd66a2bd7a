package thinlink_test

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Modules that reach a global (PIC code goes through the GOT, static code
// does not) and are compiled as the kernel compiles: -fno-pic, with a
// target triple other than clang's default one.
var kindSources = map[string]string{
	"kg.c": "int kg_value = 5;\nint kg_get(void) { return kg_value; }\n",
	"kf.c": "extern int kg_value;\nint kg_get(void);\nint kf(int x) { return x * kg_value + kg_get(); }\n",
	"kp.c": "extern int kg_value;\nint kp(int x) { return x + kg_value; }\n",
	"ks.c": "int kf(int); int kp(int);\nint ks_entry(void) { return kf(3) + kp(4); }\n",
	"kq.c": "int kg_value = 7;\nint kp(int);\nint kq(void) { return kp(1); }\n",
}

// compileKinds compiles kindSources: kg and kf as the kernel does (-fno-pic,
// --target=x86_64-unknown-linux-gnu), kp and kq with -fPIC (what a shared
// library needs), ks with clang's defaults (PIE on Debian).
func compileKinds(t *testing.T, p *project) {
	t.Helper()
	for name, src := range kindSources {
		os.WriteFile(filepath.Join(p.dir, "src", name), []byte(src), 0o644)
		flags := []string{"-O2", "-flto=thin", "-c"}
		switch name {
		case "kg.c", "kf.c":
			flags = append(flags, "-fno-pic", "--target=x86_64-unknown-linux-gnu")
		case "kp.c", "kq.c":
			flags = append(flags, "-fPIC")
		}
		obj := "obj/" + strings.TrimSuffix(name, ".c") + ".o"
		run(t, p.dir, nil, append(append([]string{p.tc.tool("clang")}, flags...), "src/"+name, "-o", obj)...)
	}
}

// TestRelocationModelPerKind: for each kind of link (-r, -shared, -pie,
// static; through the driver and with ld.lld itself) every native object
// thindist's backends produce is byte-identical to the one lld's in-process
// LTO produces for the same link, so thindist derived the relocation model
// and the target triple of each module as lld does; and clang never
// overrides a module's triple.
func TestRelocationModelPerKind(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		compileKinds(t, p)
		objs := []string{"obj/ks.o", "obj/kf.o", "obj/kp.o", "obj/kg.o"}
		shared := []string{"obj/kq.o", "obj/kp.o"}
		cc := []string{tc.tool("clang"), "-O2", "-flto=thin", "-fuse-ld=lld", "-nostdlib"}
		ld := []string{tc.tool("ld.lld"), "-e", "ks_entry"}
		for _, k := range []struct {
			name string
			cmd  []string // without inputs, -o and --lto-obj-path
			lto  func(dir string) []string
			objs []string
		}{
			{"driver -r", append(slices.Clone(cc), "-r"), driverLTO, objs},
			{"driver -shared", append(slices.Clone(cc), "-shared"), driverLTO, shared},
			{"driver default (pie)", append(slices.Clone(cc), "-Wl,-e,ks_entry"), driverLTO, objs},
			{"driver -no-pie", append(slices.Clone(cc), "-no-pie", "-Wl,-e,ks_entry"), driverLTO, objs},
			{"driver -static-pie", append(slices.Clone(cc), "-static-pie", "-Wl,-e,ks_entry"), driverLTO, objs},
			{"ld.lld -r", append(slices.Clone(ld), "-r"), lldLTO, objs},
			{"ld.lld -shared", append(slices.Clone(ld), "-shared"), lldLTO, shared},
			{"ld.lld -pie", append(slices.Clone(ld), "-pie"), lldLTO, objs},
			{"ld.lld static", slices.Clone(ld), lldLTO, objs},
		} {
			tag := strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(k.name)
			ref := "ref-" + tag
			os.MkdirAll(filepath.Join(p.dir, ref), 0o755)
			run(t, p.dir, nil, append(append(append(slices.Clone(k.cmd), k.objs...), "-o", ref+"/out"), k.lto(ref+"/lto")...)...)
			lr, err := p.link(t, append(append(slices.Clone(k.cmd), k.objs...), "-o", "tl-"+tag), keepKept)
			if err != nil {
				t.Fatalf("%s: %v\n%s", k.name, err, lr.stderr)
			}
			if strings.Contains(lr.stderr, "overriding the module target triple") {
				t.Errorf("%s: clang overrode a module's target triple:\n%s", k.name, lr.stderr)
			}
			t.Run(tag, func(t *testing.T) { sameAsInProcess(t, p, ref, lr.res) })
		}
	})
}

func driverLTO(prefix string) []string { return []string{"-Wl,--lto-obj-path=" + prefix} }
func lldLTO(prefix string) []string    { return []string{"--lto-obj-path=" + prefix} }

// TestLayoutAsInProcess is the kernel's vmlinux.o link in small: ld.lld -r
// of a thin archive under --whole-archive whose first member is an assembly
// object holding the entry point in .head.text (as head_64.o), with a
// bitcode member placing code in .head.text too (as head64.c), then a
// --start-group of thin archives holding bitcode and assembly (as lib/lib.a
// and arch/x86/lib/lib.a; lld refuses a --start-lib nested in it). The
// relocatable object, and the executable linked from it, must have the
// in-process link's layout: the same sections in the same order with the
// same sizes, every symbol at the same place, the same entry point.
func TestLayoutAsInProcess(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		files := map[string]string{
			"head.s": ".section .head.text,\"ax\"\n.globl _start\n_start:\n call hb_main\n hlt\n",
			"hb.c":   "int lb(int); int la(int);\n__attribute__((section(\".head.text\"))) int hb_early(void) { return 7; }\nint hb_main(void) { return hb_early() + la(1) + lb(2); }\n",
			"hc.c":   "int hc_data[4] = {1, 2, 3, 4};\nint hc(int i) { return hc_data[i & 3]; }\n",
			"mid.s":  ".text\n.globl mid\nmid:\n ret\n",
			"la.c":   "int hc(int); int la(int x) { return hc(x) + 1; }\n",
			"lasm.s": ".text\n.globl lb\nlb:\n mov %edi, %eax\n ret\n",
		}
		for name, src := range files {
			os.WriteFile(filepath.Join(p.dir, "src", name), []byte(src), 0o644)
			flags := []string{"-c"}
			if strings.HasSuffix(name, ".c") {
				flags = []string{"-O2", "-flto=thin", "-fno-pic", "-c"}
			}
			obj := "obj/" + strings.TrimSuffix(name, filepath.Ext(name)) + ".o"
			run(t, p.dir, nil, append(append([]string{tc.tool("clang")}, flags...), "src/"+name, "-o", obj)...)
		}
		ar := tc.tool("llvm-ar")
		run(t, p.dir, nil, ar, "rcsT", "built-in.a", "obj/head.o", "obj/hb.o", "obj/mid.o", "obj/hc.o")
		run(t, p.dir, nil, ar, "rcsT", "lib/klib.a", "obj/la.o")
		run(t, p.dir, nil, ar, "rcsT", "lib/kasm.a", "obj/lasm.o")
		cmd := func(out string) []string {
			return []string{tc.tool("ld.lld"), "-m", "elf_x86_64", "-r", "-o", out, "--whole-archive", "built-in.a",
				"--no-whole-archive", "--start-group", "lib/klib.a", "lib/kasm.a", "--end-group"}
		}
		run(t, p.dir, nil, cmd("ip.o")...)
		p.mustLink(t, cmd("tl.o"), nil)
		sameLayout(t, filepath.Join(p.dir, "ip.o"), filepath.Join(p.dir, "tl.o"))
		for _, o := range []string{"ip", "tl"} {
			run(t, p.dir, nil, tc.tool("ld.lld"), "-m", "elf_x86_64", o+".o", "-o", o+"-exe")
		}
		sameLayout(t, filepath.Join(p.dir, "ip-exe"), filepath.Join(p.dir, "tl-exe"))
	})
}

// sameLayout compares two ELF files' entry points, section lists and
// symbols (value, size, section), which are equal when the linker saw the
// same input sections in the same order. The symbol table's own order is
// not compared: lld enters a module's global symbols when it reads the
// bitcode, before the LTO objects exist, so no command line can give the
// same order.
func sameLayout(t *testing.T, want, got string) {
	t.Helper()
	describe := func(path string) []string {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := []string{fmt.Sprintf("entry %#x", f.Entry)}
		for _, s := range f.Sections {
			out = append(out, fmt.Sprintf("section %s addr %#x size %#x", s.Name, s.Addr, s.Size))
		}
		syms, _ := f.Symbols()
		var lines []string
		for _, s := range syms {
			sec := "undef"
			if int(s.Section) < len(f.Sections) && s.Section != elf.SHN_UNDEF {
				sec = f.Sections[s.Section].Name
			}
			if elf.ST_TYPE(s.Info) == elf.STT_FILE {
				continue // names the module's source file
			}
			lines = append(lines, fmt.Sprintf("symbol %s %s+%#x size %#x", s.Name, sec, s.Value, s.Size))
		}
		slices.Sort(lines)
		return append(out, lines...)
	}
	w, g := describe(want), describe(got)
	if !slices.Equal(w, g) {
		for i := 0; i < max(len(w), len(g)); i++ {
			var a, b string
			if i < len(w) {
				a = w[i]
			}
			if i < len(g) {
				b = g[i]
			}
			if a != b {
				t.Errorf("%s differs from the in-process link's %s at line %d:\n in-process %q\n thindist   %q", got, want, i, a, b)
				return
			}
		}
	}
	if len(w) < 5 {
		t.Errorf("%s: too little to compare: %q", want, w)
	}
}
