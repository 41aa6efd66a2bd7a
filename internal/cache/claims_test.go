package cache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/digest"
)

// missCounting is a Store that counts the lookups that missed.
type missCounting struct {
	Store
	misses atomic.Int64
}

func (s *missCounting) GetActionResult(ctx context.Context, m Meter, key digest.Digest, inline []string) (*repb.ActionResult, error) {
	ar, err := s.Store.GetActionResult(ctx, m, key, inline)
	if errors.Is(err, ErrNotFound) {
		s.misses.Add(1)
	}
	return ar, err
}

// gated is a compiler whose compiles wait for gate, each writing its
// action's own object; it counts its runs per action.
type gated struct {
	gate chan struct{}
	mu   sync.Mutex
	runs map[string]int
}

func (g *gated) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	g.mu.Lock()
	g.runs[j.Action.ID]++
	g.mu.Unlock()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, os.WriteFile(j.Out[0], elfObject(j.Action.ID), 0o644)
}

// waitUntil polls ok until it holds; a minute at most, then t fails.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never came: %s", what)
		}
	}
}

func newClaims(t *testing.T, disk *Disk) *Claims {
	t.Helper()
	c, err := NewClaims(filepath.Join(disk.Dir(), "claims"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimsCompileOnce: two and eight links (executors of their own,
// each with its own Claims, as processes have) sharing a cache miss the
// same actions at once: each action is compiled once, by the first, and
// the others wait for it and serve its object from the cache. The
// compiler is held until every link has missed every action, so that all
// are in flight together.
func TestClaimsCompileOnce(t *testing.T) {
	actions := realActions(t)
	for _, links := range []int{2, 8} {
		t.Run(fmt.Sprint(links), func(t *testing.T) {
			disk := openDisk(t)
			store := &missCounting{Store: disk}
			comp := &gated{gate: make(chan struct{}), runs: map[string]int{}}
			var wg sync.WaitGroup
			outs := make([][]string, links)
			for l := range links {
				ex := chain(t, store, comp, Options{Where: executor.LocalCache, Claims: newClaims(t, disk)})
				dir := t.TempDir()
				for i, a := range actions {
					out := filepath.Join(dir, fmt.Sprintf("%d.o", i))
					outs[l] = append(outs[l], out)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := ex.Execute(context.Background(), executor.Job{Action: a, Out: []string{out}}); err != nil {
							t.Errorf("link %d, %s: %v", l, a.ID, err)
						}
					}()
				}
			}
			waitUntil(t, "every link's miss of every action", func() bool { return store.misses.Load() >= int64(links*len(actions)) })
			close(comp.gate)
			wg.Wait()
			for _, a := range actions {
				if n := comp.runs[a.ID]; n != 1 {
					t.Errorf("%s compiled %d times by %d links, want once", a.ID, n, links)
				}
			}
			for l := range links {
				for i, a := range actions {
					if got, err := os.ReadFile(outs[l][i]); err != nil || string(got) != string(elfObject(a.ID)) {
						t.Errorf("link %d's object of %s: %q, %v", l, a.ID, got, err)
					}
				}
			}
		})
	}
}

// holdClaim runs this test binary as a process that claims key in dir and
// then waits (TestClaimHolder); it returns once the claim is held.
func holdClaim(t *testing.T, dir string, key digest.Digest) *exec.Cmd {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^TestClaimHolder$")
	cmd.Env = append(os.Environ(), "THINDIST_TEST_CLAIM="+dir, "THINDIST_TEST_CLAIM_KEY="+key.HexHash())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "claimed\n" {
		t.Fatalf("the claim holder said %q (%v)", line, err)
	}
	return cmd
}

// TestClaimHolder is holdClaim's process: it claims the key, says so, and
// waits to be killed.
func TestClaimHolder(t *testing.T) {
	dir := os.Getenv("THINDIST_TEST_CLAIM")
	if dir == "" {
		t.Skip("run by holdClaim")
	}
	key, err := digest.Parse(os.Getenv("THINDIST_TEST_CLAIM_KEY"), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &Claims{dir: dir, Wait: time.Minute, Poll: time.Second}
	if _, _, err := c.Claim(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	fmt.Println("claimed")
	select {}
}

// TestClaimHolderGone: a link that claimed an action and is killed
// mid-compile (its claim ends with its process), or is stopped (^Z), holds
// no other link up: the waiter compiles the action itself.
func TestClaimHolderGone(t *testing.T) {
	a := realActions(t)[0]
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			disk := openDisk(t)
			claims := newClaims(t, disk)
			claims.Poll = 10 * time.Millisecond
			holder := holdClaim(t, claims.dir, mustKey(t, a))
			store := &missCounting{Store: disk}
			comp := &fake{produce: func() ([]byte, *executor.Result) { return elfObject("mine"), &executor.Result{} }}
			ex := chain(t, store, comp, Options{Where: executor.LocalCache, Claims: claims})
			out := filepath.Join(t.TempDir(), "obj")
			done := make(chan error, 1)
			go func() {
				_, err := ex.Execute(context.Background(), executor.Job{Action: a, Out: []string{out}})
				done <- err
			}()
			if how == "killed" {
				waitUntil(t, "the waiter's miss", func() bool { return store.misses.Load() >= 1 })
				if n := comp.runs.Load(); n != 0 {
					t.Fatalf("the waiter compiled while the claim was held")
				}
				holder.Process.Kill()
			} else {
				holder.Process.Signal(syscall.SIGSTOP)
				defer holder.Process.Signal(syscall.SIGCONT)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := comp.runs.Load(); n != 1 {
				t.Errorf("the waiter compiled %d times, want once", n)
			}
			if got, _ := os.ReadFile(out); string(got) != string(elfObject("mine")) {
				t.Errorf("the waiter's object: %q", got)
			}
		})
	}
}

// TestClaimsFailedCompile: the claimer's compile fails (nothing stored):
// the waiter compiles the action itself, and gets its own result.
func TestClaimsFailedCompile(t *testing.T) {
	a := realActions(t)[0]
	disk := openDisk(t)
	store := &missCounting{Store: disk}
	gate := make(chan struct{})
	var first atomic.Bool
	comp := &fake{produce: func() ([]byte, *executor.Result) {
		if first.CompareAndSwap(false, true) {
			<-gate
			return nil, &executor.Result{Exit: proc.Exit{ExitCode: 1}, Stderr: []byte("error: no\n")}
		}
		return elfObject("second"), &executor.Result{}
	}}
	results := make(chan error, 2)
	outs := []string{filepath.Join(t.TempDir(), "obj"), filepath.Join(t.TempDir(), "obj")}
	for _, out := range outs {
		ex := chain(t, store, comp, Options{Where: executor.LocalCache, Claims: newClaims(t, disk)})
		go func() {
			_, err := ex.Execute(context.Background(), executor.Job{Action: a, Out: []string{out}})
			results <- err
		}()
	}
	waitUntil(t, "both links' misses", func() bool { return store.misses.Load() >= 2 })
	close(gate)
	var failed, ok int
	for range outs {
		if err := <-results; err != nil {
			failed++
		} else {
			ok++
		}
	}
	if failed != 1 || ok != 1 || comp.runs.Load() != 2 {
		t.Errorf("%d failed, %d compiled, %d compiles; want the first failed, the waiter compiled", failed, ok, comp.runs.Load())
	}
}
