package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/workerserver"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/testprog"
	"golang.org/x/sys/unix"
)

// serverDir is a worker server directory of the test's own. When the test
// ends the server there, if any, is stopped, and the test fails if a
// server process of the directory is still running.
func serverDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "server")
	t.Cleanup(func() {
		cmd := exec.Command(thindist, "server", "stop", "--all")
		cmd.Env = append(os.Environ(), serverEnv(dir, "1m")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("thindist server stop: %v\n%s", err, out)
		}
		for _, pid := range serverProcs(dir) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the server of %s (pid %d) still ran after thindist server stop", dir, pid)
		}
	})
	return dir
}

// serverEnv has links use the server in dir, with idle as its idle period.
func serverEnv(dir, idle string) []string {
	return []string{"THINDIST_SERVER_DIR=" + dir, "THINDIST_WORKER_IDLE=" + idle}
}

// serverProcs lists the running `thindist server run` processes of dir.
func serverProcs(dir string) []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if bytes.Contains(b, []byte("\x00server\x00run\x00")) && bytes.Contains(b, []byte("--server-dir="+dir+"\x00")) && !workerserver.Gone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// serverStatus is the status of the server of thindist (the binary under
// test) in dir, from `thindist server status --json`; nil when none runs.
func serverStatus(t *testing.T, dir string) *workerserver.Status {
	t.Helper()
	for _, st := range serverStatuses(t, dir) {
		if st.Identity.Thindist.Path == thindist {
			return st
		}
	}
	return nil
}

// serverStatuses is `thindist server status --json` for dir: every
// server there.
func serverStatuses(t *testing.T, dir string) []*workerserver.Status {
	t.Helper()
	code, out := runThindistStdout(t, "/", serverEnv(dir, "1m"), "server", "status", "--json")
	if code != 0 {
		t.Fatalf("thindist server status --json: exit %d\n%s", code, out)
	}
	var sts []*workerserver.Status
	if err := json.Unmarshal([]byte(out), &sts); err != nil {
		t.Fatalf("thindist server status --json: %v\n%s", err, out)
	}
	return sts
}

// serverSockets are the sockets of the servers in dir, answering or not.
func serverSockets(dir string) []string {
	socks, _ := filepath.Glob(workerserver.Socket(filepath.Join(dir, "server-*")))
	return socks
}

var serverPID = regexp.MustCompile(`^the worker server, pid (\d+), `)

// recordServer is the pid of the server a run's record names, 0 if none.
func recordServer(run *record.Run) int {
	m := serverPID.FindStringSubmatch(run.WorkerServer)
	if m == nil {
		return 0
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// waitGone waits (two minutes at most) for process pid to exit.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !workerserver.Gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
	}
}

// TestServerWarmAcrossLinks: two `thindist link`s in a row share one
// server; the second starts no worker and checks no compiler, and both
// write the native objects and the output exec'd clang writes. The links
// are small (fewer actions than --jobs), where per-link workers would not
// pay for their start, and run on the server's all the same. Then
// `thindist server status` and `stop` say what they do.
func TestServerWarmAcrossLinks(t *testing.T) {
	w := testprog.Worker(t)
	// Two modules on --jobs=2: a small link, its jobs at once on two
	// workers, both kept idle for the next link.
	p := program(t, testprog.Options{Modules: 2, CXX: true, ArchiveModules: 1, Seed: 21})
	dir := serverDir(t)
	link := func(flag, out string) (map[string][]byte, *record.Run) {
		keep, cache := filepath.Join(t.TempDir(), "natives"), t.TempDir()
		args := append([]string{"link", "--jobs=2", flag, "--keep-native-objects=" + keep, "--", clang + "++", "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
		if code, msg := runThindist(t, p.Dir, append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache), append(args, "-o", out)...); code != 0 {
			t.Fatalf("thindist %s: exit %d\n%s", strings.Join(args, " "), code, msg)
		}
		objs := testprog.ReadTree(t, keep)
		objs["OUTPUT"], _ = os.ReadFile(filepath.Join(p.Dir, out))
		return objs, lastRecord(t, p.Dir, cache)
	}
	ref, _ := link("--no-worker", "prog-exec")
	var st [2]*workerserver.Status
	for i := range st {
		objs, run := link("--worker="+w, fmt.Sprintf("prog-%d", i))
		if len(objs) != len(p.Modules)+1 || len(objs) != len(ref) {
			t.Fatalf("link %d: %d files, %d with exec'd clang", i, len(objs), len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(b, objs[name]) {
				t.Errorf("link %d: %s differs from exec'd clang's", i, name)
			}
		}
		for _, a := range run.Actions {
			if !a.Worker {
				t.Errorf("link %d: %s not on a worker: %s", i, a.Module, a.NotWorker)
			}
		}
		if st[i] = serverStatus(t, dir); st[i] == nil {
			t.Fatalf("no server after link %d", i)
		}
		started := strings.HasSuffix(run.WorkerServer, ", started by this link")
		if recordServer(run) != st[i].PID || started != (i == 0) {
			t.Errorf("link %d's record: workers of %q; the server is pid %d", i, run.WorkerServer, st[i].PID)
		}
	}
	if st[1].PID != st[0].PID || st[1].Workers.Started != st[0].Workers.Started || st[1].Links != 2 {
		t.Errorf("after the second link: pid %d, %d workers started, %d links; after the first: pid %d, %d workers started",
			st[1].PID, st[1].Workers.Started, st[1].Links, st[0].PID, st[0].Workers.Started)
	}
	if c := st[1].Compilers; len(c) != 1 || c[0].Why != "" || !c[0].At.Equal(st[0].Compilers[0].At) {
		t.Errorf("compilers after the second link: %+v; after the first: %+v; want one, checked once", c, st[0].Compilers)
	}
	if got := runProg(t, p, "prog-1"); got != p.Want {
		t.Errorf("the program prints %q, want %q", got, p.Want)
	}
	serverCommands(t, dir, st[1])
}

// serverCommands checks what `thindist server status` and `stop` print
// for the server st describes, then with no server.
func serverCommands(t *testing.T, dir string, st *workerserver.Status) {
	t.Helper()
	env := serverEnv(dir, "1m")
	_, out := runThindistStdout(t, "/", env, "server", "status")
	for _, want := range []string{
		fmt.Sprintf("server:    pid %d, up ", st.PID),
		"(this thindist's)",
		"socket:    " + st.Socket,
		"thindist:  " + st.Identity.Version + ", " + thindist,
		fmt.Sprintf("served:    %d jobs on workers, 2 links; 0 connections open", st.Workers.Jobs),
		"compilers: " + clang + "++ (" + clang + "): on the workers",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("thindist server status lacks %q:\n%s", want, out)
		}
	}
	if code, out := runThindistStdout(t, "/", env, "server", "stop"); code != 0 || out != fmt.Sprintf("stopped the server (pid %d) of %s and its workers\n", st.PID, thindist) {
		t.Errorf("thindist server stop: exit %d, %q", code, out)
	}
	if !workerserver.Gone(st.PID) {
		t.Errorf("the server (pid %d) still runs after thindist server stop", st.PID)
	}
	for _, c := range []struct{ cmd, want string }{
		{"status", "no server running in " + dir + "\n"},
		{"stop", "no server of " + thindist + " running in " + dir + "\n"},
	} {
		if code, out := runThindistStdout(t, "/", env, "server", c.cmd); code != 0 || out != c.want {
			t.Errorf("thindist server %s with no server: exit %d, %q; want %q", c.cmd, code, out, c.want)
		}
	}
}

// TestServerEightConcurrentLinks: eight DTLTO links at once share one
// server, which one of them started and which counts all eight; every
// program is correct.
func TestServerEightConcurrentLinks(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 3, Seed: 5})
	dir, cache := serverDir(t), t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := linkCmd{p: p, objs: p.Objects, out: fmt.Sprintf("app%d", i), dist: thindist, distArgs: []string{"--jobs=1", "--no-cache", "--worker=" + w},
				env: append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)}
			if stderr, err := l.run(t); err != nil {
				errs[i] = fmt.Sprintf("link %d: %v\n%s", i, err, stderr)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatal(e)
		}
	}
	for i := range n {
		if got := runProg(t, p, fmt.Sprintf("app%d", i)); got != p.Want {
			t.Errorf("app%d prints %q, want %q", i, got, p.Want)
		}
	}
	st := serverStatus(t, dir)
	if st == nil || st.Links != n {
		t.Fatalf("the server's status after %d links: %+v", n, st)
	}
	es, err := record.Open(cache).List()
	if err != nil || len(es) != n {
		t.Fatalf("%d records (%v), want %d", len(es), err, n)
	}
	starters := 0
	for _, e := range es {
		run, err := record.ReadFile(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		if recordServer(run) != st.PID {
			t.Errorf("record %s: workers of %q, want the server's (pid %d)", e.ID, run.WorkerServer, st.PID)
		}
		if strings.HasSuffix(run.WorkerServer, ", started by this link") {
			starters++
		}
		for _, a := range run.Actions {
			if !a.Worker {
				t.Errorf("record %s: %s not on a worker: %s", e.ID, a.Module, a.NotWorker)
			}
		}
	}
	if starters != 1 {
		t.Errorf("%d links say they started the server, want 1", starters)
	}
}

// TestServerDirNotPrivate: a server directory that others can reach, or
// that another user owns, gets no server: the link warns, and compiles
// its backends on workers of its own.
func TestServerDirNotPrivate(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 4, Seed: 9})
	for _, c := range []struct {
		name, want string
		make       func(dir string) error
	}{
		{"mode", "has mode 0755: others can reach it", func(dir string) error { return os.Mkdir(dir, 0o755) }},
		{"owner", "is owned by another user", func(dir string) error {
			if os.Getuid() != 0 {
				t.Skip("needs root to give the directory to another user")
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Chown(dir, 65534, 65534)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "server")
			if err := c.make(dir); err != nil {
				t.Fatal(err)
			}
			cache := t.TempDir()
			stderr := checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + w},
				env: append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)})
			if want := "no worker server: " + dir + " " + c.want; !strings.Contains(stderr, want) {
				t.Errorf("the link's stderr lacks %q:\n%s", want, stderr)
			}
			noServerOwnWorkers(t, dir, lastRecord(t, p.Dir, cache))
		})
	}
}

// noServerOwnWorkers fails t if a server runs in dir, or if a module of
// run was not compiled on a worker (the link's own).
func noServerOwnWorkers(t *testing.T, dir string, run *record.Run) {
	t.Helper()
	if len(serverSockets(dir)) > 0 || len(serverProcs(dir)) > 0 {
		t.Errorf("a server runs in %s after the link", dir)
	}
	for _, a := range run.Actions {
		if !a.Worker {
			t.Errorf("%s not on the link's own worker: %s", a.Module, a.NotWorker)
		}
	}
}

// TestServerIdle: a server exits by itself once its idle period passes
// without a link; --worker-idle=0, and CI set in the environment, start
// none.
func TestServerIdle(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 3, Seed: 13})
	t.Run("1s", func(t *testing.T) {
		dir, cache := serverDir(t), t.TempDir()
		checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + w}, env: append(serverEnv(dir, "1s"), "THINDIST_CACHE_DIR="+cache)})
		pid := recordServer(lastRecord(t, p.Dir, cache))
		if pid == 0 {
			t.Fatal("the link's record names no server")
		}
		waitGone(t, pid, "the server idle for its idle period of 1s")
		if socks := serverSockets(dir); len(socks) > 0 {
			t.Errorf("the server left its socket %s", socks)
		}
	})
	for _, c := range []struct{ name, idle, ci string }{{"0", "0", ""}, {"CI", "", "1"}} {
		t.Run(c.name, func(t *testing.T) {
			dir, cache := serverDir(t), t.TempDir()
			checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + w},
				env: append(serverEnv(dir, c.idle), "CI="+c.ci, "THINDIST_CACHE_DIR="+cache)})
			noServerOwnWorkers(t, dir, lastRecord(t, p.Dir, cache))
		})
	}
}

// TestServerReplacedByARebuild: a link of thindist rebuilt at the same
// path (here written again, and so of another modification time) replaces
// its installation's server, and so does a link of another umask (the
// workers would write its objects with other permissions than its clang);
// the old server exits. A copy elsewhere is another installation: its
// server is its own, and the first one's stays.
func TestServerReplacedByARebuild(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 3, Seed: 17})
	data, err := os.ReadFile(thindist)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "thindist")
	install := func(when time.Time) {
		if err := os.WriteFile(other+".new", data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(other+".new", when, when); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other+".new", other); err != nil {
			t.Fatal(err)
		}
	}
	install(time.Now().Add(-time.Hour))
	dir, cache := serverDir(t), t.TempDir()
	links := []struct {
		exe, umask string
		rebuild    bool
		replaces   int // the link whose server this one's replaces; -1 for none
	}{{thindist, "022", false, -1}, {other, "022", false, -1}, {other, "022", true, 1}, {other, "077", false, 2}, {thindist, "022", false, -1}}
	pids := make([]int, len(links))
	for i, l := range links {
		if l.rebuild {
			install(time.Now())
		}
		out := fmt.Sprintf("app%d", i)
		args := append([]string{"-c", `umask "$0" && exec "$@"`, l.umask, l.exe, "link", "--jobs=1", "--no-cache", "--worker=" + w, "--",
			clang, "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
		cmd := exec.Command("sh", append(args, "-o", out)...)
		cmd.Dir, cmd.Env = p.Dir, testEnv(t, append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("link %d (%s, umask %s): %v\n%s", i, l.exe, l.umask, err, msg)
		}
		if got := runProg(t, p, out); got != p.Want {
			t.Errorf("%s prints %q, want %q", out, got, p.Want)
		}
		run := lastRecord(t, p.Dir, cache)
		pids[i] = recordServer(run)
		started := strings.HasSuffix(run.WorkerServer, ", started by this link")
		if pids[i] == 0 || started != (i < 4) {
			t.Errorf("link %d (%s, umask %s): workers of %q; want a server it started: %v", i, l.exe, l.umask, run.WorkerServer, i < 4)
		}
		if l.replaces >= 0 {
			waitGone(t, pids[l.replaces], "the server replaced")
		}
	}
	if pids[4] != pids[0] {
		t.Errorf("the last link of %s used the server of pid %d; the first one's, pid %d, should have stayed", thindist, pids[4], pids[0])
	}
	sts := serverStatuses(t, dir)
	if len(sts) != 2 {
		t.Fatalf("%d servers: %+v; want two, one of each installation", len(sts), sts)
	}
	for _, st := range sts {
		if st.Identity.Thindist.Path == other && (st.PID != pids[3] || st.Identity.Umask != "0077") {
			t.Errorf("the server of %s: %+v; want pid %d with umask 0077", other, st, pids[3])
		}
	}
}

// TestServerPerInstallation: two builds of thindist (a project's pinned
// copy, a developer's own: another version, another path) link at once,
// each with a server of its own that the other's links never replace;
// `thindist server stop` of one stops only its own, `server status` lists
// both.
func TestServerPerInstallation(t *testing.T) {
	testsupport.Slow(t, "builds thindist a second time")
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 3, Seed: 23})
	pinned := filepath.Join(t.TempDir(), "thindist")
	build := exec.Command("go", "build", "-ldflags=-X github.com/thindist/thindist/internal/sys/version.Version=pinned", "-o", pinned,
		"github.com/thindist/thindist/cmd/thindist")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a second thindist: %v\n%s", err, out)
	}
	dir := serverDir(t)
	exes := []string{thindist, pinned}
	const rounds = 3
	var pids [2][rounds]int
	var wg sync.WaitGroup
	for e, exe := range exes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				cache, out := t.TempDir(), fmt.Sprintf("app-%d-%d", e, i)
				args := append([]string{"link", "--jobs=1", "--no-cache", "--worker=" + w, "--", clang, "-flto=thin", "-fuse-ld=lld", "-O2"}, p.Objects...)
				cmd := exec.Command(exe, append(args, "-o", out)...)
				cmd.Dir, cmd.Env = p.Dir, testEnv(t, append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)...)
				if msg, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("link %d of %s: %v\n%s", i, exe, err, msg)
					return
				}
				if got := runProg(t, p, out); got != p.Want {
					t.Errorf("%s prints %q, want %q", out, got, p.Want)
				}
				pids[e][i] = recordServer(lastRecord(t, p.Dir, cache))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for e, exe := range exes {
		for i := range rounds {
			if pids[e][i] == 0 || pids[e][i] != pids[e][0] {
				t.Errorf("the links of %s used the servers of pids %v; want one server, never replaced", exe, pids[e])
				break
			}
		}
		if workerserver.Gone(pids[e][0]) {
			t.Errorf("the server of %s (pid %d) is gone", exe, pids[e][0])
		}
	}
	if pids[0][0] == pids[1][0] {
		t.Fatalf("both installations used the server of pid %d", pids[0][0])
	}
	_, out := runThindistStdout(t, "/", serverEnv(dir, "1m"), "server", "status")
	for _, want := range []string{
		fmt.Sprintf("server:    pid %d, up ", pids[0][0]), fmt.Sprintf("server:    pid %d, up ", pids[1][0]),
		"thindist:  pinned", ", " + pinned + " (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("thindist server status lacks %q:\n%s", want, out)
		}
	}
	cmd := exec.Command(pinned, "server", "stop")
	cmd.Env = testEnv(t, serverEnv(dir, "1m")...)
	msg, err := cmd.CombinedOutput()
	want := fmt.Sprintf("stopped the server (pid %d) of %s and its workers\n"+
		"left running: 1 server of other installations of thindist (thindist server status lists them; --all stops them)\n", pids[1][0], pinned)
	if err != nil || string(msg) != want {
		t.Errorf("%s server stop: %v, %q; want %q", pinned, err, msg, want)
	}
	waitGone(t, pids[1][0], "the pinned thindist's server, stopped")
	if workerserver.Gone(pids[0][0]) {
		t.Errorf("%s server stop stopped the server of %s (pid %d) too", pinned, thindist, pids[0][0])
	}
	if sts := serverStatuses(t, dir); len(sts) != 1 || sts[0].PID != pids[0][0] {
		t.Errorf("servers after %s server stop: %+v; want only pid %d", pinned, sts, pids[0][0])
	}
}

// TestServerChecksAChangedCompiler: a compiler path that the server checked
// and that now resolves to clang 19 is checked again: its jobs run
// without the worker, and the report says why. They run on the server's
// fork server instead, kept warm for the next link: that one starts no
// fork server, and its objects are exec'd clang 19's.
func TestServerChecksAChangedCompiler(t *testing.T) {
	w := testprog.Worker(t)
	bin19 := "/usr/lib/llvm-19/bin"
	testprog.NeedLLVM(t, bin19, "clang", "ld.lld")
	p22 := program(t, testprog.Options{Modules: 3, Seed: 19})
	p19, err := testprog.Generate(t.TempDir(), testprog.Options{Modules: 3, Seed: 19})
	if err != nil {
		t.Fatal(err)
	}
	if err := p19.Compile(context.Background(), filepath.Join(bin19, "clang")); err != nil {
		t.Fatal(err)
	}
	cc := filepath.Join(t.TempDir(), "clang")
	dir := serverDir(t)
	// The clang 19 links share a cache, emptied between them: links of
	// one build share an environment, and so the server's fork server.
	caches := []string{t.TempDir(), t.TempDir()}
	var pids [3]int
	var natives [3]map[string][]byte
	for i, c := range []struct {
		p      *testprog.Program
		target string
	}{{p22, clang}, {p19, filepath.Join(bin19, "clang")}, {p19, filepath.Join(bin19, "clang")}} {
		os.Remove(cc)
		if err := os.Symlink(c.target, cc); err != nil {
			t.Fatal(err)
		}
		cache, keep := caches[min(i, 1)], filepath.Join(t.TempDir(), "natives")
		env := append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)
		if i == 2 {
			if code, msg := runThindist(t, "/", env, "cache", "clear"); code != 0 {
				t.Fatalf("thindist cache clear: exit %d\n%s", code, msg)
			}
		}
		args := append([]string{"link", "--jobs=1", "--worker=" + w, "--keep-native-objects=" + keep, "--", cc, "-flto=thin", "-fuse-ld=lld", "-O2"}, c.p.Objects...)
		code, msg := runThindist(t, c.p.Dir, env, append(args, "-o", "prog")...)
		if code != 0 {
			t.Fatalf("thindist link with %s → %s: exit %d\n%s", cc, c.target, code, msg)
		}
		if got := runProg(t, c.p, "prog"); got != c.p.Want {
			t.Errorf("%s → %s: the program prints %q, want %q", cc, c.target, got, c.p.Want)
		}
		natives[i] = testprog.ReadTree(t, keep)
		run := lastRecord(t, c.p.Dir, cache)
		pids[i] = recordServer(run)
		why := cc + ` is "Debian clang version 19`
		for _, a := range run.Actions {
			if a.Worker != (i == 0) || i > 0 && !strings.HasPrefix(a.NotWorker, why) {
				t.Errorf("%s → %s: %s on a worker: %v (why not: %q)", cc, c.target, a.Module, a.Worker, a.NotWorker)
			}
			if a.Forked != (i > 0) {
				t.Errorf("%s → %s: %s forked: %v", cc, c.target, a.Module, a.Forked)
			}
		}
		if i > 0 && (!strings.Contains(msg, "3 forked by the worker server") || strings.Contains(msg, "fork server")) {
			t.Errorf("link %d with clang 19: its summary should say its 3 backends were forked by the worker server, and start no fork server of its own:\n%s", i, msg)
		}
		if i == 1 {
			if _, report := runThindistStdout(t, c.p.Dir, env, "report"); !strings.Contains(report, "no worker: "+why) {
				t.Errorf("thindist report lacks %q:\n%s", "no worker: "+why, report)
			}
		}
	}
	if pids[0] == 0 || pids[1] != pids[0] || pids[2] != pids[0] {
		t.Errorf("the links' servers: pids %v; want one", pids)
	}
	if st := serverStatus(t, dir); st == nil || st.ForkServers != 1 || st.Forked != 6 {
		t.Errorf("the server's status after two clang 19 links: %+v; want 1 fork server and 6 jobs forked", st)
	}
	// The same backends exec'd by clang 19, with no server.
	keep := filepath.Join(t.TempDir(), "natives")
	args := append([]string{"link", "--jobs=1", "--no-worker", "--no-fork-server", "--keep-native-objects=" + keep, "--", cc, "-flto=thin", "-fuse-ld=lld", "-O2"}, p19.Objects...)
	if code, msg := runThindist(t, p19.Dir, append(serverEnv(dir, "0"), "THINDIST_CACHE_DIR="+t.TempDir()), append(args, "-o", "prog-exec")...); code != 0 {
		t.Fatalf("thindist link with clang 19 exec'd: exit %d\n%s", code, msg)
	}
	ref := testprog.ReadTree(t, keep)
	for i := 1; i < 3; i++ {
		if len(natives[i]) != len(ref) {
			t.Errorf("link %d: %d native objects, %d exec'd", i, len(natives[i]), len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(b, natives[i][name]) {
				t.Errorf("link %d: %s differs from exec'd clang 19's", i, name)
			}
		}
	}
}

// TestServerKilledMidJob: a server killed (SIGKILL) while it runs a job:
// that job is rerun by exec, the link's other jobs run without the server,
// and the program is correct. The worker kills its server once it has
// read the start of its first job.
func TestServerKilledMidJob(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 4, Seed: 23})
	killer := filepath.Join(t.TempDir(), "server-killing-worker")
	script := "#!/bin/sh\n[ \"$1\" = --serve ] || exec " + w + " \"$@\"\nhead -c 4 >/dev/null\nkill -9 $PPID\nexec sleep 60\n"
	if err := os.WriteFile(killer, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, cache := serverDir(t), t.TempDir()
	checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + killer}, env: append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)})
	run := lastRecord(t, p.Dir, cache)
	reruns := 0
	for _, a := range run.Actions {
		switch {
		case a.Worker:
			t.Errorf("%s on a worker", a.Module)
		case strings.HasPrefix(a.NotWorker, "the worker server ended mid-job (") && strings.HasSuffix(a.NotWorker, "); rerun by exec"):
			reruns++
		case !strings.HasPrefix(a.NotWorker, "no worker server: the worker server ended mid-job ("):
			t.Errorf("%s: why not on a worker: %q", a.Module, a.NotWorker)
		}
	}
	if reruns != 1 || len(run.Actions) != len(p.Modules) {
		t.Errorf("%d of %d jobs rerun by exec, want 1 of %d", reruns, len(run.Actions), len(p.Modules))
	}
	pid := recordServer(run)
	if pid == 0 {
		t.Fatalf("the record names no server: %q", run.WorkerServer)
	}
	waitGone(t, pid, "the killed server")
}

// TestServerSessionAndHangup: the server a link starts stays in that
// link's session (the kernel's autogroup scheduling weighs a session as
// one task group: a session of its own would weigh its jobs against the
// whole build's), in a process group of its own (a terminal's ^C does not
// reach it), and a SIGHUP does not end it.
func TestServerSessionAndHangup(t *testing.T) {
	w := testprog.Worker(t)
	p := program(t, testprog.Options{Modules: 3, Seed: 17})
	dir, cache := serverDir(t), t.TempDir()
	checkBoth(t, p, linkCmd{distArgs: []string{"--jobs=1", "--worker=" + w}, env: append(serverEnv(dir, "1m"), "THINDIST_CACHE_DIR="+cache)})
	pid := recordServer(lastRecord(t, p.Dir, cache))
	if pid == 0 {
		t.Fatal("the link's record names no server")
	}
	sid, err := unix.Getsid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := unix.Getsid(0); sid != own {
		t.Errorf("the server's session is %d, the links' (this test's) %d", sid, own)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("the server's process group is %d (%v), want one of its own (%d)", pgid, err, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // long enough for a handler to run; its absence is what is tested
	if st := serverStatus(t, dir); st == nil || st.PID != pid {
		t.Errorf("after SIGHUP the server is %+v, want pid %d still serving", st, pid)
	}
}
