package report

import (
	"testing"
	"time"
)

func TestTracePath(t *testing.T) {
	start := time.Date(2026, 11, 23, 20, 19, 46, 123e6, time.UTC)
	for in, want := range map[string]string{
		"/tmp/t-%p.json":   "/tmp/t-4242.json",
		"t-%t-%p.json":     "t-20261123-201946.123-4242.json",
		"100%%-%x-%":       "100%-%x-%",
		"plain/trace.json": "plain/trace.json",
	} {
		if got := TracePath(in, 4242, start); got != want {
			t.Errorf("TracePath(%q) = %q, want %q", in, got, want)
		}
	}
}
