package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// groupLine reads the grouping part of the remote summary line.
var groupLine = regexp.MustCompile(`(\d+) grouped into (\d+) executions \((\d+) sent alone again\)`)

func parseGroup(t *testing.T, stderr string) (grouped, groups, reruns int) {
	t.Helper()
	m := groupLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no grouping figures in the summary:\n%s", stderr)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return n(1), n(2), n(3)
}

// groupArgs make a link group: one execution slot (groups form while
// every slot is busy) and up to 4 actions to a group, so 4 in flight.
var groupArgs = []string{"--remote-jobs=1", "--remote-group=4"}

// groupedServer starts a test double whose first n GetActionResult calls
// (the remote cache's lookups of the first n actions of a cold link) wait
// for each other, so that the actions reach the grouper together rather
// than as this loaded machine happens to schedule them: the first takes
// the execution slot, the others wait for it in a group. The wait is
// bounded (a safety net, not a timing assumption: a late action merely
// finds the slot free and goes alone).
func groupedServer(t *testing.T, n int, o reapitest.Options) (*reapitest.FakeServer, string) {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	o.Hook = func(method string, _ metadata.MD) error {
		if method != reapitest.MethodGetActionResult {
			return nil
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
		}
		return nil
	}
	return fakeRemote(t, o)
}

// TestRemoteGroup (issue 10, item 4): with --remote-group the small
// backends of a cold link run several to one remote execution; the program
// is byte for byte the one an ungrouped remote link gives and behaves like
// the in-process one; each member is cached under its own key, so a
// relink from another directory executes nothing and sends no group.
func TestRemoteGroup(t *testing.T) {
	p := remoteProgram(t)
	jobs := len(p.Modules)

	ref, refAddr := fakeRemote(t, reapitest.Options{})
	if stderr, err := remoteLink(t, p, refAddr, "--remote-fallback=none"); err != nil {
		t.Fatalf("ungrouped remote link: %v\n%s", err, stderr)
	}
	if n := ref.Stats().Executions; n != int64(jobs) {
		t.Fatalf("the ungrouped link ran %d executions for %d actions", n, jobs)
	}
	want, err := os.ReadFile(filepath.Join(p.Dir, "prog-dtlto"))
	if err != nil {
		t.Fatal(err)
	}

	srv, addr := groupedServer(t, 4, reapitest.Options{})
	stderr := checkBoth(t, p, linkCmd{distArgs: append([]string{"--no-cache", "--remote=grpc://" + addr, "--remote-fallback=none",
		remoteOnly}, groupArgs...)})
	got, err := os.ReadFile(filepath.Join(p.Dir, "prog-dtlto"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the grouped link's program differs from the ungrouped one's")
	}
	grouped, groups, reruns := parseGroup(t, stderr)
	st := srv.Stats()
	if groups < 1 || grouped < 2 || reruns != 0 {
		t.Errorf("%d actions grouped into %d executions, %d sent alone again; want groups and no re-run\n%s", grouped, groups, reruns, stderr)
	}
	if wantExec := int64(jobs - grouped + groups); st.Executions != wantExec {
		t.Errorf("%d executions on the server, want %d (%d actions, %d of them in %d groups)", st.Executions, wantExec, jobs, grouped, groups)
	}
	t.Logf("cold: %s", firstMatch(stderr))

	// Another directory, the same relative paths: every member hits under
	// its own key.
	srv.ResetStats()
	q := copyProgram(t, p)
	stderr, err = remoteLink(t, q, addr, append([]string{"--remote-fallback=none"}, groupArgs...)...)
	if err != nil {
		t.Fatalf("warm link: %v\n%s", err, stderr)
	}
	wantCorrectOrFailed(t, q, stderr, nil)
	sum := parseRemote(t, stderr)
	if st := srv.Stats(); st.Executions != 0 || st.ExecuteCalls != 0 || sum.hits != jobs {
		t.Errorf("warm link from another directory: %d executions, %d Execute calls, summary %+v; want %d cache hits and nothing else\n%s",
			st.Executions, st.ExecuteCalls, sum, jobs, stderr)
	}
}

// TestRemoteGroupMemberFails: one module fails on the worker, in a group
// (5 of the 6 actions are grouped: the module is alone 1 time in 6, which
// the test logs); the link fails with that module's error and its own
// stderr, once, and no other module is reported.
func TestRemoteGroupMemberFails(t *testing.T) {
	p := remoteProgram(t)
	jobs := len(p.Modules)
	bad := filepath.Base(p.Modules[1].Object)
	wrapper := filepath.Join(t.TempDir(), "clang-failing-one")
	script := "#!/bin/sh\nfor a; do case $a in *" + bad + ") echo \"worker-side: $a broke\" >&2; exit 1;; esac; done\nexec " + clang + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, addr := groupedServer(t, jobs, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-compiler="+wrapper, "--remote-fallback=local", "--remote-jobs=1", "--remote-group=8")
	if wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("a failing member was hidden:\n%s", stderr)
	}
	if n := strings.Count(stderr, "failed on a remote worker"); n != 1 {
		t.Errorf("%d modules reported failed, want the one:\n%s", n, stderr)
	}
	for _, want := range []string{"backend compilation of " + p.Modules[1].Object, "worker-side: " + bad + " broke"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, stderr)
		}
	}
	if fallbackWarning.MatchString(stderr) {
		t.Errorf("the member's failure was taken for a remote failure and compiled locally:\n%s", stderr)
	}
	if strings.Count(stderr, "worker-side:") != 1 {
		t.Errorf("the worker's stderr is shown other than once:\n%s", stderr)
	}
	t.Logf("server: %d executions for %d actions; %s", srv.Stats().Executions, jobs, groupLine.FindString(stderr))
}

// TestRemoteGroupFaults: a faulty result of a group (wrong digest,
// missing or empty output, a broken stream, an unavailable service) ends
// in the correct program or a clear failure, never a wrong object. Each
// fault hits the first two executions: the action alone in the slot, then
// the group that waited for it.
func TestRemoteGroupFaults(t *testing.T) {
	p := remoteProgram(t)
	for _, f := range []struct {
		name  string
		fault reapitest.Fault
		n     int
	}{
		{"wrong-digest", reapitest.FaultWrongOutputDigest, 2},
		{"missing-output", reapitest.FaultMissingOutput, 2},
		{"zero-byte-output", reapitest.FaultZeroByteOutput, 2},
		{"escaping-output", reapitest.FaultEscapingOutputPath, 2},
		{"broken-stream", reapitest.FaultBreakExecuteStream, 2},
		{"unavailable-always", reapitest.FaultUnavailable, 1000},
	} {
		for _, fallback := range []string{"local", "none"} {
			t.Run(f.name+"/"+fallback, func(t *testing.T) {
				q := copyProgram(t, p)
				srv, addr := groupedServer(t, 4, reapitest.Options{})
				srv.InjectFault(reapitest.MethodExecute, f.fault, f.n)
				stderr, err := remoteLink(t, q, addr, append([]string{"--remote-fallback=" + fallback, "--remote-retries=3"}, groupArgs...)...)
				ok := wantCorrectOrFailed(t, q, stderr, err)
				if fallback == "local" && !ok {
					t.Errorf("with --remote-fallback=local the link failed:\n%s", stderr)
				}
				if f.n < 1000 && srv.PendingFaults(reapitest.MethodExecute, f.fault) == f.n {
					t.Errorf("the fault never fired")
				}
				t.Logf("%s", groupLine.FindString(stderr))
			})
		}
	}
}
