package pipeline

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// downLink runs the actions with cfg and checks what every link with a
// service that fails mid-link must show: the objects of a local link, the
// failure said once, and none of the per-action warnings of a cache entry
// or an execution that failed. It returns stderr.
func downLink(t *testing.T, cfg *config.Config, actions []*action.Action) string {
	t.Helper()
	want := map[string][]byte{}
	local := &config.Config{Jobs: 2, Progress: "never", NoCache: true, NoForkServer: true}
	if err := RunWith(context.Background(), local, Env{Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}, actions, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		p := a.Abs(a.Outputs[0].Path)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = b
		os.Remove(p)
	}

	var stderr bytes.Buffer
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	if err := RunWith(context.Background(), cfg, env, actions, Options{}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for p, b := range want {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: not the object a local link makes (%v)", p, err)
		}
	}
	out := stderr.String()
	if n := strings.Count(out, "stopped answering"); n != 1 {
		t.Errorf("said %d times that the service stopped answering, want once:\n%s", n, out)
	}
	for _, bad := range []string{"cache entry unusable", "could not store", "remote execution failed"} {
		if strings.Contains(out, bad) {
			t.Errorf("a warning %q for the service that stopped:\n%s", bad, out)
		}
	}
	return out
}

// TestRemoteCacheStopsAnsweringMidLink: a remote cache that stops
// answering (a stopped server, a proxy that stopped relaying) once the
// link's lookups are in flight is given up when the first of them gets no
// answer within --remote-timeout: the lookups in flight are abandoned, no
// later call is made, and the actions compile here. The lookups wait
// outside the local slots: with one slot, three are in flight.
func TestRemoteCacheStopsAnsweringMidLink(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 6, Seed: 5})
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	srv.HangAfter(1) // GetCapabilities, then nothing
	cfg := cacheOnlyRemote(addr)
	cfg.Remote.Timeout = 2 * time.Second
	cfg.Remote.Attempts = 10
	downLink(t, cfg, actions)
	st := srv.Stats()
	if st.Hung != 3 || st.HungEnded != st.Hung {
		t.Errorf("%d calls hung and %d of them ended, want the 3 lookups in flight (1 slot, 2 ahead), all abandoned: %v",
			st.Hung, st.HungEnded, st.RPCs)
	}
}

// TestRemoteCacheDiesMidLink: a remote cache that dies mid-link
// (connections reset, then refused) is given up after its retry window;
// the link compiles the rest here and says so once.
func TestRemoteCacheDiesMidLink(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 6, Seed: 6})
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	srv.DieAfter(3) // GetCapabilities and two lookups
	cfg := cacheOnlyRemote(addr)
	cfg.Remote.Timeout = time.Second
	cfg.Remote.Attempts = 10
	downLink(t, cfg, actions)
}

// TestRemoteExecutionStopsAnsweringMidLink: remote execution whose
// service stops answering while actions execute there drops the service
// (the executions in flight are cancelled) and finishes the link here;
// storing results does not wait on it.
func TestRemoteExecutionStopsAnsweringMidLink(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 6, Seed: 7})
	var srv *reapitest.FakeServer
	var once sync.Once
	srv, addr := reapitest.StartT(t, reapitest.Options{ExecutingFor: -1, Hook: func(method string, _ metadata.MD) error {
		if method == reapitest.MethodExecute {
			// This Execute goes through, and stays EXECUTING.
			once.Do(func() { srv.HangAfter(1) })
		}
		return nil
	}})
	cfg := &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, Remote: config.Remote{
		Target: "grpc://" + addr, Fallback: "local", Jobs: 1, LocalJobs: 1, NoRace: true,
		Attempts: 10, Timeout: 2 * time.Second, ExecStall: time.Hour, Upload: true,
	}}
	downLink(t, cfg, actions)
	if n := srv.Stats().Cancellations; n != 1 {
		t.Errorf("%d executions cancelled, want the one in flight", n)
	}
}
