package pipeline

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// listenCounting listens on addr ("127.0.0.1:0" for any port) and counts
// the connections made to it, which it accepts and leaves unanswered.
func listenCounting(t *testing.T, addr string) (string, *atomic.Int64) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var conns []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	return lis.Addr().String(), &n
}

// link runs the actions with cfg and returns stderr.
func link(t *testing.T, cfg *config.Config, actions []*action.Action) string {
	t.Helper()
	var stderr bytes.Buffer
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	if err := RunWith(context.Background(), cfg, env, actions, Options{}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	return stderr.String()
}

// TestFullyCachedLinkDoesNotConnect: a link whose every action is in the
// local cache does not connect to the remote service at all.
func TestFullyCachedLinkDoesNotConnect(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 8})
	_, live := reapitest.StartT(t, reapitest.Options{})
	cfg := cacheOnlyRemote(live)
	cfg.NoCache, cfg.CacheDir, cfg.CacheSize = false, t.TempDir(), "1G"
	link(t, cfg, actions) // fills the local cache

	silent, conns := listenCounting(t, "127.0.0.1:0")
	cfg.Remote.Target = "grpc://" + silent
	link(t, cfg, actions)
	if n := conns.Load(); n != 0 {
		t.Errorf("a fully cached link made %d connections to the remote service", n)
	}
}

// TestUnreachableRemoteRemembered: a service that cannot be reached is
// marked so in the cache directory; a later link within the period does
// not try it and says so, once; a link that reaches it clears the mark.
func TestUnreachableRemoteRemembered(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 9})
	// An address nothing listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	cfg := cacheOnlyRemote(dead)
	cfg.CacheDir = t.TempDir() // the mark's directory; NoCache keeps every action a miss
	cfg.Remote.Timeout = time.Second
	link(t, cfg, actions)
	if remote.NotesIn(cfg.CacheDir).Unreachable(cfg.Remote.Target, time.Now()) == nil {
		t.Fatalf("no mark after the service could not be reached")
	}

	_, conns := listenCounting(t, dead) // answers nothing: a dial would stall
	out := link(t, cfg, actions)
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections to a service marked unreachable", n)
	}
	if n := strings.Count(out, "could not be reached by a link"); n != 1 {
		t.Errorf("said %d times that the service is skipped, want once:\n%s", n, out)
	}

	// Marked, but reached: the mark goes.
	_, live := reapitest.StartT(t, reapitest.Options{})
	marked := time.Now().Add(-remote.UnreachableFor) // expired: the link tries the service
	remote.NotesIn(cfg.CacheDir).MarkUnreachable("grpc://"+live, marked)
	cfg.Remote.Target = "grpc://" + live
	link(t, cfg, actions)
	if err := remote.NotesIn(cfg.CacheDir).Unreachable(cfg.Remote.Target, marked); err != nil {
		t.Errorf("the mark is still there after a link reached the service: %v", err)
	}
}
