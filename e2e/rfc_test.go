package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestRFCv0 runs a job file in the RFC draft schema (version 0.x: templated
// arguments, codegen-tool, a modules table with archive-member mappings).
// The shards of a separate thin link over an archive record its members as
// "libfoo.a(m0.o at NN)"; the members are unpacked to other names
// (m.1000.o), and the modules table maps the one to the other. Each backend
// must find every module, its own and imported ones, under the identifier
// the shards use, and the program must link and print what it should.
func TestRFCv0(t *testing.T) {
	t.Parallel()
	p := program(t, testprog.Options{Modules: 4, Seed: 23, ArchiveModules: 3})
	l := linkCmd{p: p, objs: p.Objects, out: "prog-index",
		flags: []string{"-Wl,--thinlto-index-only,--thinlto-emit-imports-files"}}
	l.mustLink(t)

	shards, err := filepath.Glob(filepath.Join(p.Dir, "libfoo.a(*).thinlto.bc"))
	if err != nil || len(shards) != 3 {
		t.Fatalf("shards of the archive members: %q, %v", shards, err)
	}
	sort.Strings(shards)
	type module struct{ id, file string }
	mods := []module{{"main.o", "main.o"}}
	index := map[string]int{"main.o": 0}
	for i, s := range shards {
		id := strings.TrimSuffix(filepath.Base(s), ".thinlto.bc") // libfoo.a(m0.o at 88)
		member := id[len("libfoo.a("):strings.LastIndex(id, " at ")]
		file := "m." + string(rune('0'+i)) + "000.o"
		// The member's content, under another name; the original is gone.
		if err := os.Rename(filepath.Join(p.Dir, member), filepath.Join(p.Dir, file)); err != nil {
			t.Fatal(err)
		}
		index[id] = len(mods)
		mods = append(mods, module{id, file})
	}
	if err := os.Remove(filepath.Join(p.Dir, "libfoo.a")); err != nil {
		t.Fatal(err)
	}

	var modules []any
	for _, m := range mods {
		if m.id == m.file {
			modules = append(modules, m.id)
		} else {
			modules = append(modules, []string{m.id, m.file})
		}
	}
	var jobs []any
	var natives []string
	imported := 0
	for i, m := range mods {
		imports, err := os.ReadFile(filepath.Join(p.Dir, m.id+".imports"))
		if err != nil {
			t.Fatal(err)
		}
		inputs := []any{i, m.id + ".thinlto.bc"}
		for _, imp := range strings.Split(strings.TrimSpace(string(imports)), "\n") {
			if imp == "" {
				continue
			}
			k, ok := index[imp]
			if !ok {
				t.Fatalf("%s imports %q, not a module of the link", m.id, imp)
			}
			inputs = append(inputs, k)
			imported++
		}
		native := "native" + string(rune('0'+i)) + ".o"
		natives = append(natives, native)
		jobs = append(jobs, map[string]any{
			"inputs":  inputs,
			"outputs": []string{native},
			"args": []any{[]any{"", "inputs", 0}, []any{"-fthinlto-index=", "inputs", 1},
				"-o", []any{"", "outputs", 0}},
		})
	}
	if imported == 0 {
		t.Fatal("no module imports from another: the test would prove nothing")
	}
	jf := map[string]any{
		"version": map[string]int{"major": 0, "minor": 1},
		"common": map[string]any{
			"linker_output": "prog",
			"codegen-tool":  clang,
			"args":          []any{"-c", "-O2", "-fpic", "-x", "ir", "-Wno-unused-command-line-argument"},
			"modules":       modules,
		},
		"jobs": jobs,
	}
	data, err := json.MarshalIndent(jf, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p.Dir, "v0.json")
	if err := os.WriteFile(path, data, 0o666); err != nil {
		t.Fatal(err)
	}
	code, out := runThindist(t, p.Dir, nil, "--jobs=2", path)
	if code != 0 {
		t.Fatalf("thindist exit %d:\n%s\njob file:\n%s", code, out, data)
	}
	for _, n := range natives {
		fi, err := os.Stat(filepath.Join(p.Dir, n))
		if err != nil || fi.Size() == 0 {
			t.Fatalf("object %s: %v (size %v)", n, err, fi)
		}
	}
	linkNatives(t, p, natives, "prog")
	if got := runProg(t, p, "prog"); got != p.Want {
		t.Errorf("prints %q, want %q", got, p.Want)
	}
	noLeftovers(t, p.Dir)
}
