package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseArgvStripsAndConfigures(t *testing.T) {
	s, err := parseArgv([]string{"-O2", "--thindist-jobs=3", "-fpic", "--thindist-quiet", "--thindist-compiler=/x/clang"},
		env(map[string]string{"THINDIST_JOBS": "9", "THINDIST_PROGRESS": "never"}), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.opts, []string{"-O2", "-fpic"}) {
		t.Errorf("clang options %q", s.opts)
	}
	if s.cfg.Jobs != 3 || !s.cfg.Quiet || s.cfg.Progress != "never" || s.compiler != "/x/clang" {
		t.Errorf("config %+v, compiler %q: the option must win over THINDIST_JOBS, the rest come from the environment", s.cfg, s.compiler)
	}
}

func TestParseArgvErrors(t *testing.T) {
	for _, argv := range [][]string{
		{"--thindist-jobs=0"},
		{"--thindist-no-such-option=1"},
		{"--thindist-progress=sometimes"},
	} {
		if _, err := parseArgv(argv, env(nil), "/nonexistent/ld.lld"); err == nil {
			t.Errorf("%q: no error", argv)
		}
	}
}

func TestCompilerChoice(t *testing.T) {
	bin := t.TempDir()
	beside := filepath.Join(bin, "clang")
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	linker := filepath.Join(bin, "ld.lld")
	t.Setenv("PATH", t.TempDir()) // no clang in PATH
	for _, tc := range []struct {
		name string
		argv []string
		env  map[string]string
		want string
	}{
		{"option beats everything", []string{"/argv/clang", "--thindist-compiler=/opt/clang"}, map[string]string{"THINDIST_COMPILER": "/env/clang"}, "/opt/clang"},
		{"environment beats Argv[0]", []string{"/argv/clang", "-O2"}, map[string]string{"THINDIST_COMPILER": "/env/clang"}, "/env/clang"},
		{"Argv[0] when not an option", []string{"/argv/clang", "-O2"}, nil, "/argv/clang"},
		{"beside the linker", []string{"-O2"}, nil, beside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseArgv(tc.argv, env(tc.env), linker)
			if err != nil {
				t.Fatal(err)
			}
			if s.compiler != tc.want {
				t.Errorf("compiler %q, want %q", s.compiler, tc.want)
			}
			if len(s.opts) > 0 && !strings.HasPrefix(s.opts[0], "-") {
				t.Errorf("the compiler stayed among the options: %q", s.opts)
			}
		})
	}
	if _, err := parseArgv([]string{"-O2"}, env(nil), filepath.Join(t.TempDir(), "ld.lld")); err == nil ||
		!strings.Contains(err.Error(), "THINDIST_COMPILER") {
		t.Errorf("no clang anywhere: error %v, want advice naming THINDIST_COMPILER", err)
	}
}

func TestBuildActions(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"t1.o", "t2.o", "ext/m.o"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("BC"), 0o644)
	}
	s := &settings{compiler: "/usr/bin/clang", opts: []string{"-O2", "-fpic"}}
	nodes := []node{
		{ModuleID: "t1.o", ModulePath: filepath.Join(dir, "t1.o"), ModuleSize: 100,
			SummaryIndexPath: "t1.1.9.native.o.thinlto.bc", NativeObjectPath: "t1.1.9.native.o",
			Imports: []string{"t2.o", "lib.a(m.o at 88)", "t2.o"}, TargetTriple: "x86_64-pc-linux-gnu", TaskNumber: 1},
		{ModuleID: "lib.a(m.o at 88)", ModulePath: filepath.Join(dir, "ext/m.o"), ModuleSize: 50,
			SummaryIndexPath: filepath.Join(dir, "m.2.9.native.o.thinlto.bc"), NativeObjectPath: filepath.Join(dir, "m.2.9.native.o"),
			TaskNumber: 2},
	}
	actions, err := buildActions(dir, s, nodes)
	if err != nil {
		t.Fatal(err)
	}
	a := actions[0]
	want := []string{"/usr/bin/clang", "-O2", "-fpic", "-c", "-x", "ir", "-fthinlto-index=t1.1.9.native.o.thinlto.bc",
		"-target", "x86_64-pc-linux-gnu", "-o", "t1.1.9.native.o", "t1.o"}
	if got := a.Command(); !reflect.DeepEqual(got, want) {
		t.Errorf("command\n got %q\nwant %q", got, want)
	}
	wantIn := []action.Input{
		{Path: "t1.o", Role: action.RoleModule},
		{Path: "t1.1.9.native.o.thinlto.bc", Role: action.RoleIndex},
		{Path: "t2.o", Role: action.RoleImport},
		{Path: "lib.a(m.o at 88)", Source: filepath.Join(dir, "ext/m.o"), Role: action.RoleImport},
	}
	if !reflect.DeepEqual(a.Inputs, wantIn) {
		t.Errorf("inputs\n got %+v\nwant %+v", a.Inputs, wantIn)
	}
	if a.ID != "t1.o" || a.Dir != dir || a.ModuleSize != 100 {
		t.Errorf("ID %q Dir %q ModuleSize %d", a.ID, a.Dir, a.ModuleSize)
	}

	m := actions[1]
	if !m.Mapped() || m.Inputs[0].Path != "lib.a(m.o at 88)" || m.Inputs[0].Source != filepath.Join(dir, "ext/m.o") {
		t.Errorf("archive member input %+v: the command must name the member as the shard does", m.Inputs[0])
	}
	if m.Inputs[1].Path != "m.2.9.native.o.thinlto.bc" {
		t.Errorf("a mapped action's absolute shard stays %q; it must be relative so it can be laid out", m.Inputs[1].Path)
	}
	if _, err := m.Layout(); err != nil {
		t.Errorf("layout: %v", err)
	}
	if got := m.Command(); strings.Contains(strings.Join(got, " "), "-target") {
		t.Errorf("no triple, yet %q", got)
	}
}

func TestBuildActionsRejects(t *testing.T) {
	s := &settings{compiler: "clang"}
	for _, n := range []node{
		{SummaryIndexPath: "x.bc", NativeObjectPath: "x.o"},
		{ModuleID: "x.o", NativeObjectPath: "x.o"},
		{ModuleID: "x.o", SummaryIndexPath: "x.bc"},
		{ModuleID: "x.o", SummaryIndexPath: "x.bc", NativeObjectPath: "x.n.o", Imports: []string{""}},
	} {
		if _, err := buildActions("/tmp", s, []node{n}); err == nil {
			t.Errorf("%+v: no error", n)
		}
	}
}

func TestLinkerOutput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ld.lld", "a.o", "-o", "app"}, "app"},
		{[]string{"ld.lld", "-oapp", "a.o"}, "app"},
		{[]string{"ld.lld", "--output", "out/app", "a.o"}, "out/app"},
		{[]string{"ld.lld", "--output=out/app"}, "out/app"},
		{[]string{"ld.lld", "-output=app"}, "app"},
		{[]string{"ld.lld", "-omagic", "--oformat=binary", "-o", "x", "-opt-remarks-format", "yaml"}, "x"},
		{[]string{"ld.lld", "-o", "first", "-o", "last"}, "last"},
		{[]string{"ld.lld", "a.o"}, ""},
		{[]string{"ld.lld", "-o"}, ""},
	} {
		if got := linkerOutput(tc.args); got != tc.want {
			t.Errorf("linkerOutput(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
