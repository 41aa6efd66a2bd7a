package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// linkWith links the record program through thindist as lld's distributor
// with more driver flags, and returns what the link printed.
func linkWith(t *testing.T, dir, cache string, flags ...string) string {
	t.Helper()
	out, err := dtltoRun(t, dir, cache, append([]string{"main.o", "libutil.a", "-o", "app"}, flags...)...)
	if err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	return out
}

// TestSideFilesBypassTheCache: a backend asked for side files
// (--save-temps through lld's --thinlto-remote-compiler-arg) writes them on
// every link, a relink included, because such actions are neither looked up
// nor stored; the record says why.
func TestSideFilesBypassTheCache(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	temps := func() []string {
		var got []string
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && (strings.HasSuffix(p, ".s") || strings.HasSuffix(p, ".bc") && !strings.Contains(p, "thinlto")) {
				got = append(got, p)
			}
			return nil
		})
		return got
	}
	for i := range 2 {
		linkWith(t, dir, cache, "-Wl,--thinlto-remote-compiler-arg=--save-temps")
		got := temps()
		if len(got) == 0 {
			t.Fatalf("link %d wrote no --save-temps files", i+1)
		}
		for _, p := range got {
			os.Remove(p)
		}
		run := lastRecord(t, dir, cache)
		for _, a := range run.Actions {
			if a.Where != record.WhereLocal || strings.Join(a.Miss, "; ") != "not cached: --save-temps writes side files" {
				t.Errorf("link %d: %s was %s: %q", i+1, a.Module, a.Where, a.Miss)
			}
		}
	}
}

// TestReplayedStderrSaysSo: what a backend printed (here -Rpass remarks,
// which write no file) is replayed by a cache hit, headed by the run whose
// compile printed it, since the paths it names are that run's.
func TestReplayedStderrSaysSo(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	remarks := "-Wl,--thinlto-remote-compiler-arg=-Rpass=.*"
	first := linkWith(t, dir, cache, remarks)
	if !strings.Contains(first, "remark:") || strings.Contains(first, "replayed") {
		t.Fatalf("the first link printed:\n%s", first)
	}
	id := lastRecord(t, dir, cache).ID
	second := linkWith(t, dir, cache, remarks)
	run := lastRecord(t, dir, cache)
	for _, a := range run.Actions {
		if a.Where != record.WhereLocalCache {
			t.Fatalf("relink: %s was %s", a.Module, a.Where)
		}
	}
	if want := "(replayed from the cache: printed by run " + id + ";"; !strings.Contains(second, want) || !strings.Contains(second, "remark:") {
		t.Errorf("the relink's replayed remarks lack %q:\n%s", want, second)
	}
}

// TestSideFilesStayHere: with remote execution, a backend asked for side
// files compiles on this machine, where they are written, not on a worker
// (which would write them on its own disk and return the object alone),
// even when every action is meant for the cluster.
func TestSideFilesStayHere(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	srv, addr := fakeRemote(t, reapitest.Options{})
	out := linkWith(t, dir, cache, "-Wl,--thinlto-remote-compiler-arg=--save-temps",
		"-Xthinlto-distributor=--remote=grpc://"+addr, "-Xthinlto-distributor=--remote-fallback=none",
		"-Xthinlto-distributor="+remoteOnly)
	var temps []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".s") {
			temps = append(temps, p)
		}
		return nil
	})
	if len(temps) == 0 {
		t.Errorf("the link wrote no --save-temps files here:\n%s", out)
	}
	if n := srv.Stats().Executions; n != 0 {
		t.Errorf("%d actions asked for side files ran on the cluster, want none", n)
	}
	for _, a := range lastRecord(t, dir, cache).Actions {
		if a.Where != record.WhereLocal {
			t.Errorf("%s was %s, want local", a.Module, a.Where)
		}
	}
	if !strings.Contains(out, "asks the compiler for side files (--save-temps)") {
		t.Errorf("the link did not say why it compiled here:\n%s", out)
	}
}
