package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/recordview"
	"github.com/thindist/thindist/internal/testprog"
)

// TestWorkerCompilesAndReportSaysSo: with --worker, a link's backends are
// compiled on the worker, and the record and the report say so; with
// --no-worker they are not.
func TestWorkerCompilesAndReportSaysSo(t *testing.T) {
	path := testprog.Worker(t)
	actions := testprog.Actions(t, testprog.Options{Modules: 4, Seed: 7})
	for _, no := range []bool{false, true} {
		cfg := &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, CacheDir: t.TempDir(), Worker: path, NoWorker: no}
		r := runRecorded(t, cfg, actions)
		for _, a := range r.Actions {
			if a.Worker == no {
				t.Errorf("--no-worker=%v: %s on a worker: %v (why not: %q)", no, a.Module, a.Worker, a.NotWorker)
			}
		}
		var text bytes.Buffer
		recordview.WriteText(&text, r)
		if want := "(0 forked, 4 on a worker)"; !no && !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
}
