package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var hedgeLine = regexp.MustCompile(`(\d+) hedged on a second worker \((\d+) won there\)`)

// TestRemoteHedge: the worker hangs on the link's critical action (its
// largest module, no history, a small part of the link's work) whenever it gets it as a cacheable action,
// as a slow or dying worker would; the hedge, a second execution of it
// marked do_not_cache, is not merged with the first and finishes. With no
// local slot (--remote-local-jobs=0) nothing else could save the link:
// it finishes, the stalled execution is cancelled, and the summary and
// the trace say that the second execution won.
func TestRemoteHedge(t *testing.T) {
	// Enough modules for a second run of the largest to stay within
	// dispatch.HedgeBudget of the link's work.
	p := program(t, testprog.Options{Modules: 40, Seed: 11})
	largest := largestObject(t, p)
	srv, addr := fakeRemote(t, reapitest.Options{})
	srv.StallIf(func(a *repb.Action, c *repb.Command) bool {
		if a.GetDoNotCache() {
			return false
		}
		for _, arg := range c.GetArguments() {
			if filepath.Base(arg) == largest {
				return true
			}
		}
		return false
	})
	trace := filepath.Join(t.TempDir(), "trace.json")
	stderr, err := remoteLink(t, p, addr, "--remote-local-jobs=0", "--remote-fallback=none", "--remote-exec-stall=60s", "--trace="+trace)
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("link failed:\n%s", stderr)
	}
	m := hedgeLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no hedge figures in the remote summary:\n%s", stderr)
	}
	if hedged, _ := strconv.Atoi(m[1]); hedged != 1 {
		t.Errorf("%d actions hedged, want 1 (the critical one)\n%s", hedged, stderr)
	}
	if won, _ := strconv.Atoi(m[2]); won != 1 {
		t.Errorf("%d hedges won, want the stalled action's\n%s", won, stderr)
	}
	if n := srv.Stats().Cancellations; n == 0 {
		t.Errorf("the server saw no cancellation of the stalled execution")
	}
	if tr, err := os.ReadFile(trace); err != nil || !strings.Contains(string(tr), `"hedged":"won by the second execution"`) {
		t.Errorf("the trace does not say that the second execution won (%v):\n%s", err, tr)
	}
	noLeftovers(t, p.Dir)
}

// largestObject is the base name of p's largest object file, the module
// thindist deems critical without history.
func largestObject(t *testing.T, p *testprog.Program) string {
	t.Helper()
	name, size := "", int64(-1)
	for _, o := range p.Objects {
		fi, err := os.Stat(filepath.Join(p.Dir, o))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Size() > size:
			name, size = filepath.Base(o), fi.Size()
		case fi.Size() == size:
			t.Fatalf("%s and %s are the same size: no single largest module", name, o)
		}
	}
	return name
}
