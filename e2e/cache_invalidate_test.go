package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// users lists the modules whose jobs read module m (as the module compiled
// or as an import), from lld's job file.
func (res *result) users(m string) []string {
	var u []string
	for _, j := range res.jobs {
		for _, x := range j.uses {
			if x == m {
				u = append(u, j.module)
				break
			}
		}
	}
	return u
}

// objectID is how module m of the program appears in job files (modID).
func objectID(p *testprog.Program, m testprog.Module) string {
	if m.Archive == "" || strings.Contains(m.Archive, "thin") {
		if m.Spelling != "" {
			return m.Spelling
		}
		return m.Object // thin archive members keep their own path
	}
	return "" // regular archive member: matched by prefix, see findID
}

// findID returns the job-file identity of module m among ids.
func findID(p *testprog.Program, m testprog.Module, ids []string) string {
	if id := objectID(p, m); id != "" {
		return id
	}
	prefix := m.Archive + "(" + filepath.Base(m.Object) + " at "
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	return ""
}

var firstConst = regexp.MustCompile(`\{(\d+)u`)

// TestCacheInvalidation changes one thing at a time and relinks: a source file
// (only its module and the modules importing from it recompile), a flag
// that lld puts in common.args, a --thinlto-remote-compiler-arg, the
// compiler's executable and the sample profile (every job misses). After
// each, the program must be byte-identical to one linked without the cache.
func TestCacheInvalidation(t *testing.T) {
	r := newRig(t, testprog.Options{Modules: 8, Seed: 3, ArchiveModules: 2, ThinArchiveModules: 2})
	cold := r.link(link{})
	all := cold.modules()
	if !equalSets(cold.compiled, all) {
		t.Fatalf("cold link compiled %q, want %q", cold.compiled, all)
	}

	// checkAgainstUncached links the same way without the cache and
	// compares the programs.
	checkAgainstUncached := func(what string, res *result, l link) {
		t.Helper()
		got := keep(t, res, "prog.cached")
		l.distArgs = append(append([]string{}, l.distArgs...), "--no-cache")
		unc := r.linkQuiet(l)
		r.jobFile(unc.out) // consume it
		sameBinary(t, what, got, readFile(t, unc.out))
	}
	missAll := func(what string, l link) *result {
		t.Helper()
		res := r.link(l)
		if !equalSets(res.compiled, res.modules()) {
			t.Errorf("%s: compiled %q, want every job %q", what, res.compiled, res.modules())
		}
		if s := res.summary(t); s.cached != 0 {
			t.Errorf("%s: summary %+v, want nothing cached", what, s)
		}
		return res
	}
	hitAll := func(what string, l link) *result {
		t.Helper()
		res := r.link(l)
		if len(res.compiled) != 0 {
			t.Errorf("%s: compiled %q, want nothing", what, res.compiled)
		}
		return res
	}

	t.Run("source", func(t *testing.T) {
		// A helper module that some, but not all, jobs read.
		var changed testprog.Module
		var id string
		for _, m := range r.p.Modules[1:] {
			cand := findID(r.p, m, all)
			if n := len(cold.users(cand)); n >= 2 && n < len(all) {
				changed, id = m, cand
				break
			}
		}
		if id == "" {
			t.Fatalf("no module is imported by some but not all jobs; jobs %+v", cold.jobs)
		}
		src := filepath.Join(r.p.Dir, changed.Source)
		text := string(readFile(t, src))
		loc := firstConst.FindStringSubmatchIndex(text)
		if loc == nil {
			t.Fatalf("no constant in %s", src)
		}
		text = text[:loc[2]] + "12345" + text[loc[3]:]
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.p.Compile(context.Background(), clang); err != nil {
			t.Fatal(err)
		}
		res := r.link(link{})
		want := res.users(findID(r.p, changed, res.modules()))
		t.Logf("changed %s; jobs reading it: %q", id, want)
		if !equalSets(res.compiled, want) {
			t.Errorf("after changing %s compiled %q, want exactly the jobs reading it %q", changed.Source, res.compiled, want)
		}
		if s := res.summary(t); s.cached != len(all)-len(want) {
			t.Errorf("summary %+v, want %d cached", s, len(all)-len(want))
		}
		checkAgainstUncached("source change", res, link{})
		hitAll("relink after the source change", link{})
	})

	t.Run("common.args", func(t *testing.T) {
		// -O1 after the rig's -O2: lld passes the last one in common.args.
		l := link{flags: []string{"-O1"}}
		res := missAll("-O1", l)
		checkAgainstUncached("-O1", res, l)
		hitAll("-O1 again", l)
		hitAll("back to -O2", link{})
	})

	t.Run("remote-compiler-arg", func(t *testing.T) {
		l := link{flags: []string{"-Wl,--thinlto-remote-compiler-arg=-fno-unroll-loops"}}
		res := missAll("--thinlto-remote-compiler-arg", l)
		checkAgainstUncached("--thinlto-remote-compiler-arg", res, l)
		hitAll("--thinlto-remote-compiler-arg again", l)
	})

	t.Run("compiler", func(t *testing.T) {
		// The same path with other content, as after a compiler upgrade.
		name := filepath.Base(r.wrapper)
		r.writeWrapper(name, "A")
		missAll("new compiler", link{})
		hitAll("new compiler again", link{})
		// Other content of the same size: only the content digest in
		// the key can tell.
		before, _ := os.Stat(r.wrapper)
		r.writeWrapper(name, "B")
		if after, _ := os.Stat(r.wrapper); after.Size() != before.Size() {
			t.Fatalf("wrapper size changed: %d vs %d", after.Size(), before.Size())
		}
		missAll("new compiler of the same size", link{})
	})

	t.Run("sample profile", func(t *testing.T) {
		prof, err := r.p.WriteSampleProfile("prof.txt")
		if err != nil {
			t.Fatal(err)
		}
		l := link{flags: []string{"-fprofile-sample-use=prof.txt"}}
		missAll("with a profile", l)
		hitAll("with the same profile", l)
		text := strings.Replace(string(readFile(t, prof)), "main:1000:1", "main:90000:9", 1)
		text = strings.ReplaceAll(text, ":500:50", ":7:1")
		if err := os.WriteFile(prof, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		res := missAll("with a changed profile (same path)", l)
		checkAgainstUncached("changed profile", res, l)
	})
}
