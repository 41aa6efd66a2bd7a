package pipeline

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/reapitest"
	"github.com/thindist/thindist/internal/report"
)

// TestRunTakesTheDialBegunBefore: a run given a dial begun before it
// (StartDial, as the distributor does while it reads the job file) uses
// that connection instead of making its own; a run whose configuration
// no longer matches the dial makes its own, and the unused dial is
// closed by its owner.
func TestRunTakesTheDialBegunBefore(t *testing.T) {
	srv, addr := reapitest.StartT(t, reapitest.Options{})
	newCfg := func(instance string) *config.Config {
		return &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, Remote: config.Remote{
			Target: "grpc://" + addr, Instance: instance, CacheOnly: true, Fallback: "local", Jobs: 1, Attempts: 1, Timeout: time.Minute,
		}}
	}
	run := func(cfg *config.Config, d *Dialing) {
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
	if d.claim(RemoteOptions(&cfg.Remote)) {
		t.Errorf("the dial can be claimed again after the run took it")
	}
	d.Close() // taken: nothing to do

	// Another instance than the dial's: the run dials itself.
	d = StartDial(context.Background(), newCfg("other"))
	run(newCfg(""), d)
	if n := capabilities(); n != 3 {
		t.Errorf("%d GetCapabilities calls after a mismatched dial, want 3 (the dial's and the run's own)", n)
	}
	d.Close()
	if d.claim(RemoteOptions(&newCfg("other").Remote)) {
		t.Errorf("a closed dial can still be claimed")
	}
	if StartDial(context.Background(), &config.Config{}) != nil {
		t.Errorf("a dial without a remote service")
	}
}
