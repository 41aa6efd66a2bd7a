package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// hidingCompiler returns a compiler for the test double's workers: clang in
// a mount namespace where each of dirs is an empty directory, as on a
// worker that has none of this machine's files, so a backend that reads a
// module from its path here instead of from its input root fails. "" when
// the machine offers no unprivileged user and mount namespaces.
func hidingCompiler(t *testing.T, dirs ...string) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil || exec.Command(unshare, "--user", "--map-root-user", "--mount", "true").Run() != nil {
		return ""
	}
	var mounts strings.Builder
	for _, d := range dirs {
		if strings.ContainsAny(d, `'"\ $`) {
			t.Fatalf("directory %q needs quoting", d)
		}
		fmt.Fprintf(&mounts, "mount -t tmpfs tmpfs %s || exit 97; ", d)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s --user --map-root-user --mount sh -c '%sexec \"$0\" \"$@\"' %s \"$@\"\n",
		unshare, mounts.String(), clang)
	path := filepath.Join(t.TempDir(), "hiding-clang")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkExecRoots checks every input root the test double ran: the index
// shard names its modules by relative paths, each of which the root holds
// (so the worker's clang finds every import where the shard says), and the
// backend wrote a non-empty object. It returns the number of roots.
func checkExecRoots(t *testing.T, roots string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(roots, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "index.thinlto.bc" {
			return err
		}
		n++
		wd := filepath.Dir(filepath.Dir(path)) // <wd>/.thindist/index.thinlto.bc
		shard, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		mods, err := bitcode.ModuleTable(shard)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		for _, m := range mods {
			if filepath.IsAbs(m.Path) {
				t.Errorf("%s names %q", path, m.Path)
			} else if _, err := os.Stat(filepath.Join(wd, m.Path)); err != nil {
				t.Errorf("%s names %q, which the input root lacks", path, m.Path)
			}
		}
		if fi, err := os.Stat(filepath.Join(wd, ".thindist", "out", "0.o")); err != nil || fi.Size() == 0 {
			t.Errorf("%s: no object, or an empty one (%v)", wd, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hiddenRemote starts the test double with its workers' compiler hiding
// dir (see hidingCompiler) and its input roots kept in roots, and returns
// thindist's arguments for it.
func hiddenRemote(t *testing.T, dir string) (srv *reapitest.FakeServer, roots string, args []string) {
	t.Helper()
	roots = t.TempDir()
	srv, addr := fakeRemote(t, reapitest.Options{ExecRootDir: roots, KeepExecRoots: true})
	args = []string{"--no-cache", "--remote=grpc://" + addr, "--remote-fallback=none", remoteOnly}
	if worker := hidingCompiler(t, dir); worker != "" {
		args = append(args, "--remote-compiler="+worker)
	} else {
		t.Log("no unprivileged mount namespaces: the workers can see this machine's tree")
	}
	return srv, roots, args
}

// allRemote links with l (a thindist link on srv) and checks that every
// backend ran on the server, that each input root holds what its shard
// names, and that the binary is the in-process link's (the same link
// without the distributor, into inprocOut), byte for byte. It returns that
// binary.
func allRemote(t *testing.T, srv *reapitest.FakeServer, roots string, l linkCmd, inprocOut string) []byte {
	t.Helper()
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(l.p.Dir, p)
	}
	stderr := l.mustLink(t)
	jobs := len(l.p.Modules)
	sum, st := parseRemote(t, stderr), srv.Stats()
	executions := int64(jobs)
	if slices.ContainsFunc(l.distArgs, func(a string) bool { return strings.HasPrefix(a, "--remote-compiler=") }) {
		executions++ // the workers' compiler asked for its version, once
	}
	if st.Executions != executions || sum.executed != jobs || sum.local != 0 {
		t.Errorf("%d executions on the server, summary %+v; want all %d jobs executed remotely\n%s", st.Executions, sum, jobs, stderr)
	}
	if strings.Contains(stderr, "run on this machine") || fallbackWarning.MatchString(stderr) {
		t.Errorf("a warning about local compiles:\n%s", stderr)
	}
	if n := checkExecRoots(t, roots); n != jobs {
		t.Errorf("%d input roots, want %d", n, jobs)
	}
	inproc := l
	inproc.dist, inproc.distArgs, inproc.out = "", nil, inprocOut
	inproc.mustLink(t)
	want, _ := os.ReadFile(abs(inprocOut))
	if got, _ := os.ReadFile(abs(l.out)); len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the remote link's binary (%d bytes) differs from the in-process one (%d bytes)", len(got), len(want))
	}
	if got := runProg(t, l.p, abs(l.out)); got != l.p.Want {
		t.Fatalf("the program prints %q, want %q", got, l.p.Want)
	}
	t.Logf("cold: %s", firstMatch(stderr))
	return want
}

// TestRemoteAbsolutePaths: a link with absolutely named objects and
// archive members copied out beside an absolute -o runs every backend on
// the test double's workers (which cannot see this machine's tree) and
// gives the in-process binary; a relink of a copy in another directory
// into its own absolute output, and one with relative paths, hit the
// remote cache for every job (the key does not depend on the paths, only
// on the order in which they sort, which these links keep).
func TestRemoteAbsolutePaths(t *testing.T) {
	p := remoteProgram(t)
	srv, roots, args := hiddenRemote(t, p.Dir)
	bin := filepath.Join(p.Dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	l := linkCmd{p: p, objs: p.AbsObjects(), out: filepath.Join(bin, "prog"), dist: thindist, distArgs: args}
	want := allRemote(t, srv, roots, l, filepath.Join(bin, "prog-inprocess"))

	jobs := len(p.Modules)
	relink := func(name string, l linkCmd) {
		t.Helper()
		srv.ResetStats()
		stderr := l.mustLink(t)
		sum, st := parseRemote(t, stderr), srv.Stats()
		if sum.hits != jobs || st.Executions != 0 || st.ExecuteCalls != 0 {
			t.Errorf("%s: %d executions, %d Execute calls, summary %+v; want %d cache hits\n%s",
				name, st.Executions, st.ExecuteCalls, sum, jobs, stderr)
		}
		out := l.out
		if !filepath.IsAbs(out) {
			out = filepath.Join(l.p.Dir, out)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Errorf("%s: the binary differs from the in-process one", name)
		}
		t.Logf("%s: %s", name, firstMatch(stderr))
	}
	q := copyProgram(t, p)
	if err := os.MkdirAll(filepath.Join(q.Dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	relink("absolute, elsewhere", linkCmd{p: q, objs: q.AbsObjects(), out: filepath.Join(q.Dir, "bin", "prog"),
		dist: thindist, distArgs: args})
	r := copyProgram(t, p)
	relink("relative", linkCmd{p: r, objs: r.Objects, out: "prog-dtlto", dist: thindist, distArgs: args})
}

// TestRemoteClimbingPaths: a link run two directories below the objects,
// which it names by "../../" paths, into an output that climbs too, runs
// every backend remotely (the working directory nested in the input root)
// and gives the in-process binary.
func TestRemoteClimbingPaths(t *testing.T) {
	p := remoteProgram(t)
	srv, roots, args := hiddenRemote(t, p.Dir)
	q := *p
	q.Dir = filepath.Join(p.Dir, "build", "deep")
	if err := os.MkdirAll(q.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, o := range p.Objects {
		objs = append(objs, "../../"+o)
	}
	l := linkCmd{p: &q, objs: objs, out: "../prog", dist: thindist, distArgs: args}
	allRemote(t, srv, roots, l, "../prog-inprocess")
}
