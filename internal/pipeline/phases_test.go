package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestRunRecordsConnecting: connecting to the remote service is part of
// the run's time and shows in the summary, before the backends.
func TestRunRecordsConnecting(t *testing.T) {
	_, addr := reapitest.StartT(t, reapitest.Options{})
	var stderr bytes.Buffer
	cfg := cacheOnlyRemote(addr)
	start := time.Now()
	summary := report.NewSummary(report.NewTimeline(start, nil))
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	if err := RunWith(context.Background(), cfg, env, failingActions(t)[:1], Options{Summary: summary}); err == nil {
		t.Fatalf("the failing action succeeded:\n%s", stderr.String())
	}
	var names []string
	for _, p := range summary.Timeline().Phases() {
		names = append(names, p.Name)
		if p.Start.Before(start) || p.End.Before(p.Start) {
			t.Errorf("phase %s from %v to %v, the run began at %v", p.Name, p.Start, p.End, start)
		}
	}
	if got := strings.Join(names, ","); got != "connecting,backends" {
		t.Errorf("phases %s, want connecting,backends", got)
	}
	if line := summary.Line(); !strings.Contains(line, "(connecting ") || !strings.Contains(line, ", backends ") {
		t.Errorf("summary %q does not say how long connecting took", line)
	}
	// A caller that brings its own summary prints it: RunWith did not.
	if strings.Contains(stderr.String(), "1 jobs, ") {
		t.Errorf("Run printed the caller's summary:\n%s", stderr.String())
	}
}

// TestRunTakesTheDialBegunBefore: a run given a dial begun before it
// (StartDial, as the distributor does while it reads the job file) uses
// that connection instead of making its own; a run whose configuration
// no longer matches the dial makes its own, and the unused dial is
// closed by its owner (remote.Dialing's own test says it is taken once).
func TestRunTakesTheDialBegunBefore(t *testing.T) {
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	newCfg := func(instance string) *config.Config {
		cfg := cacheOnlyRemote(addr)
		cfg.Remote.Instance = instance
		return cfg
	}
	run := func(cfg *config.Config, d *remote.Dialing) {
		t.Helper()
		var stderr bytes.Buffer
		env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }, Dialing: d}
		summary := report.NewSummary(report.NewTimeline(time.Now(), nil))
		if err := RunWith(context.Background(), cfg, env, failingActions(t)[:1], Options{Summary: summary}); err == nil {
			t.Fatalf("the failing action succeeded:\n%s", stderr.String())
		}
	}
	capabilities := func() int64 { return srv.Stats().RPCs[reapitest.MethodGetCapabilities] }

	cfg := newCfg("")
	d := StartDial(context.Background(), cfg)
	run(cfg, d)
	if n := capabilities(); n != 1 {
		t.Errorf("%d GetCapabilities calls, want 1: the run dialed again", n)
	}
	d.Close() // taken: nothing to do

	// Another instance than the dial's: the run dials itself.
	d = StartDial(context.Background(), newCfg("other"))
	run(newCfg(""), d)
	if n := capabilities(); n != 3 {
		t.Errorf("%d GetCapabilities calls after a mismatched dial, want 3 (the dial's and the run's own)", n)
	}
	d.Close()
	if StartDial(context.Background(), &config.Config{}) != nil {
		t.Errorf("a dial without a remote service")
	}
}

// cacheOnlyRemote configures a run of one job at a time that uses the
// service at addr as a cache only, without a local cache or fork server.
func cacheOnlyRemote(addr string) *config.Config {
	return &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, Remote: config.Remote{
		Target: "grpc://" + addr, CacheOnly: true, Fallback: "local", Jobs: 1, Attempts: 1, Timeout: time.Minute,
	}}
}
