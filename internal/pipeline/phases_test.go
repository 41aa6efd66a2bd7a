package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/reapitest"
	"github.com/thindist/thindist/internal/report"
)

// TestRunRecordsConnecting: connecting to the remote service is part of
// the run's time and shows in the summary, before the backends.
func TestRunRecordsConnecting(t *testing.T) {
	_, addr := reapitest.StartT(t, reapitest.Options{})
	var stderr bytes.Buffer
	cfg := &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, Remote: config.Remote{
		Target: "grpc://" + addr, CacheOnly: true, Fallback: "local", Jobs: 1, Attempts: 1, Timeout: time.Minute,
	}}
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
	// A caller that brings its own summary prints it: Run did not.
	if strings.Contains(stderr.String(), "1 jobs, ") {
		t.Errorf("Run printed the caller's summary:\n%s", stderr.String())
	}
}
