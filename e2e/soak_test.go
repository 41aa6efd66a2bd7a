package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestSoak: 8 concurrent links of a 200-module program share one cache
// directory and one REAPI test double that injects random faults, while
// some links have thindist killed with SIGKILL and some are interrupted
// with SIGINT at random moments. Afterwards every link that exited 0 made
// a correct program, every other one failed with a message or was killed,
// no thindist or compiler process is left, no staging directory, native
// object or index shard is left (a SIGKILLed run's staging directory goes
// at the next run in its directory; lld's own shards of a link interrupted
// before thindist started are lld's), the cache verifies clean, and a final
// relink of every program is correct. THINDIST_SOAK_SEED replays a run.
func TestSoak(t *testing.T) {
	testsupport.Slow(t, "the soak test: minutes of links")
	seed := time.Now().UnixNano()
	if s := os.Getenv("THINDIST_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (THINDIST_SOAK_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	tag := fmt.Sprintf("THINDIST_SOAK_RUN=%d", seed)
	const links = 8
	// -O0 keeps 8 x 200 backends affordable on a 2-core machine.
	p := program(t, testprog.Options{Modules: 200, Seed: seed % 1000}, "-O0")
	srv, addr := fakeRemote(t, reapitest.Options{})
	cacheDir := filepath.Join(t.TempDir(), "cache")
	base := []string{"-flto=thin", "-fuse-ld=lld", "-O0", "-fthinlto-distributor=" + thindist,
		"-Xthinlto-distributor=--remote=grpc://" + addr, "-Xthinlto-distributor=--jobs=2",
		"-Xthinlto-distributor=--remote-jobs=4", "-Xthinlto-distributor=--progress=never"}
	link := func(ctx context.Context, out string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, driver(p), append(append(append([]string{}, base...), p.Objects...), "-o", out)...)
		cmd.Dir = p.Dir
		cmd.Env = testEnv(t, "THINDIST_CACHE_DIR="+cacheDir, tag)
		// The link leads its own group, which SIGINT goes to, as from a
		// terminal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}

	// Faults: one at a time at random moments on random methods.
	faults := []struct {
		method string
		fault  reapitest.Fault
	}{
		{reapitest.MethodExecute, reapitest.FaultUnavailable},
		{reapitest.MethodExecute, reapitest.FaultDeadlineExceeded},
		{reapitest.MethodExecute, reapitest.FaultDropExecuteStream},
		{reapitest.MethodExecute, reapitest.FaultBreakExecuteStream},
		{reapitest.MethodExecute, reapitest.FaultWrongOutputDigest},
		{reapitest.MethodGetActionResult, reapitest.FaultWrongOutputDigest},
		{reapitest.MethodGetActionResult, reapitest.FaultUnavailable},
		{reapitest.MethodBatchReadBlobs, reapitest.FaultCorruptRead},
		{reapitest.MethodRead, reapitest.FaultCorruptRead},
		{reapitest.MethodFindMissingBlobs, reapitest.FaultUnavailable},
		{reapitest.MethodBatchUpdateBlobs, reapitest.FaultDeadlineExceeded},
	}
	var injected atomic.Int64
	stopFaults := make(chan struct{})
	faultsDone := make(chan struct{})
	frng := rand.New(rand.NewSource(rng.Int63()))
	go func() {
		defer close(faultsDone)
		for {
			select {
			case <-stopFaults:
				return
			case <-time.After(time.Duration(20+frng.Intn(80)) * time.Millisecond):
			}
			f := faults[frng.Intn(len(faults))]
			srv.InjectFault(f.method, f.fault, 1)
			injected.Add(1)
		}
	}()

	// Links 0 and 1 get thindist SIGKILLed, 2 and 3 are interrupted, the
	// others run to their end.
	type result struct {
		out    string
		code   int
		signal string
		stderr string
		kill   string
	}
	results := make([]result, links)
	// lld 22 leaves the index shards it has written so far when SIGINT
	// reaches it while it writes them, before it starts the distributor
	// (measured: a link of 600 modules interrupted 0.17-0.19 s in, with a
	// distributor that only sleeps, leaves m100.3.<pid>.native.o.thinlto.bc
	// and more). Those shards are lld's, named after its PID: they are
	// excused for a link interrupted before thindist ran, and for no other.
	var excusedMu sync.Mutex
	excused := map[string]bool{} // lld PIDs
	var wg sync.WaitGroup
	for i := 0; i < links; i++ {
		kill := map[int]string{0: "SIGKILL", 1: "SIGKILL", 2: "SIGINT", 3: "SIGINT"}[i]
		delay := time.Duration(rng.Intn(400)) * time.Millisecond
		killAt := time.Duration(500+rng.Intn(6000)) * time.Millisecond
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(delay)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			r := result{out: fmt.Sprintf("prog-%d", i), kill: kill}
			cmd := link(ctx, r.out)
			var eb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &eb, &eb
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			if kill != "" {
				go func() {
					time.Sleep(killAt)
					if kill == "SIGINT" {
						var lld []int
						distributing := false
						for _, pid := range processesBelow(cmd.Process.Pid) {
							exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
							distributing = distributing || exe == thindist
							if filepath.Base(exe) == "lld" {
								lld = append(lld, pid)
							}
						}
						syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
						if !distributing {
							excusedMu.Lock()
							for _, pid := range lld {
								excused[strconv.Itoa(pid)] = true
							}
							excusedMu.Unlock()
						}
						return
					}
					for _, pid := range processesBelow(cmd.Process.Pid) {
						if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == thindist {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}()
			}
			cmd.Wait()
			r.stderr = eb.String()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.signal = ws.Signal().String()
			} else {
				r.code = cmd.ProcessState.ExitCode()
			}
			results[i] = r
		}(i)
	}
	wg.Wait()
	close(stopFaults)
	<-faultsDone
	srv.ClearFaults()

	ok, failed := 0, 0
	for _, r := range results {
		switch {
		case r.code == 0 && r.signal == "":
			ok++
			if got := runProg(t, p, r.out); got != p.Want {
				t.Errorf("WRONG PROGRAM %s (kill %q): prints %q, want %q\n%s", r.out, r.kill, got, p.Want, r.stderr)
			}
		default:
			failed++
			// A SIGKILLed thindist says nothing; lld says its distributor
			// was killed.
			want := "thindist: "
			if r.kill == "SIGKILL" {
				want = "distributor execution failed"
			}
			if r.signal == "" && !strings.Contains(r.stderr, want) {
				t.Errorf("%s (kill %q) exited %d without a message (%q):\n%s", r.out, r.kill, r.code, want, r.stderr)
			}
			if r.kill == "" {
				t.Logf("%s failed without being killed (exit %d):\n%s", r.out, r.code, r.stderr)
			}
		}
	}
	noProcessesLeft(t, tag)

	// The cache is sound.
	if code, out := runThindist(t, p.Dir, nil, "cache", "verify", "--cache-dir", cacheDir); code != 0 {
		t.Errorf("thindist cache verify: exit %d\n%s", code, out)
	}

	// A final relink of every program, without faults, is correct, and
	// leaves nothing behind: it also removes the staging directories of
	// the SIGKILLed runs.
	for i := 0; i < links; i++ {
		cmd := link(context.Background(), fmt.Sprintf("prog-%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("final relink %d: %v\n%s", i, err, out)
		}
		if got := runProg(t, p, fmt.Sprintf("prog-%d", i)); got != p.Want {
			t.Errorf("final relink %d prints %q, want %q", i, got, p.Want)
		}
	}
	var bad []string
	// A kill timer may fire after its link has ended: read under the lock.
	excusedMu.Lock()
	for _, path := range leftovers(t, p.Dir) {
		// m83.85.369.native.o.thinlto.bc: module, task, lld's PID.
		name := strings.TrimSuffix(filepath.Base(path), ".native.o.thinlto.bc")
		if name != filepath.Base(path) && excused[name[strings.LastIndexByte(name, '.')+1:]] {
			t.Logf("left by lld, interrupted while it wrote its shards (not thindist's): %s", path)
			continue
		}
		bad = append(bad, path)
	}
	excusedMu.Unlock()
	if len(bad) > 0 {
		t.Errorf("left behind after the run: %q", bad)
	}
	noProcessesLeft(t, tag)
	if code, out := runThindist(t, p.Dir, nil, "cache", "verify", "--cache-dir", cacheDir); code != 0 {
		t.Errorf("thindist cache verify after the relinks: exit %d\n%s", code, out)
	}
	// A SIGKILLed writer's temporary file in the cache stays until a trim
	// finds it an hour old: counted, not an error.
	tmps, _ := os.ReadDir(filepath.Join(cacheDir, "tmp"))
	t.Logf("cache temporaries left by killed writers: %d", len(tmps))
	st := srv.Stats()
	t.Logf("soak (seed %d): %d links of %d modules: %d exited 0, %d failed or were killed (%d SIGKILL of thindist, %d SIGINT); "+
		"%d faults injected; %d remote executions; %d final relinks correct",
		seed, links, len(p.Modules), ok, failed, 2, 2, injected.Load(), st.Executions, links)
	for _, r := range results {
		t.Logf("  %s: kill %q, exit %d, signal %q", r.out, r.kill, r.code, r.signal)
	}
}

// processesBelow returns the PIDs of every process below pid.
func processesBelow(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		// The command name may hold spaces: the fields after it start at
		// the last ')'.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], c)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// noProcessesLeft checks that no process the links started (those with tag
// in their environment) is alive, allowing the kernel some time to deliver
// the parent-death signals.
func noProcessesLeft(t *testing.T, tag string) {
	t.Helper()
	var left []string
	for try := 0; try < 100; try++ {
		if left = descendants(tag); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("processes left:\n%s", strings.Join(left, "\n"))
}
