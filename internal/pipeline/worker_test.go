package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/workerserver"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/recordview"
	"github.com/thindist/thindist/internal/testsupport/testprog"
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
			if want := map[bool]proc.RunBy{false: proc.ByWorker, true: proc.ByExec}[no]; a.By() != want {
				t.Errorf("--no-worker=%v: %s run by %v, want %v (why not on a worker: %q)", no, a.Module, a.By(), want, a.NotWorker)
			}
		}
		var text bytes.Buffer
		recordview.WriteText(&text, r)
		if want := "(0 forked, 4 on a worker)"; !no && !strings.Contains(text.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestWorkerServerCannotStart: a link whose worker server cannot be
// started (here its command exits at once) warns, and compiles its
// backends on workers of its own.
func TestWorkerServerCannotStart(t *testing.T) {
	path := testprog.Worker(t)
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 7})
	dir := filepath.Join(t.TempDir(), "server")
	cfg := &config.Config{Jobs: 1, Progress: "never", NoCache: true, NoForkServer: true, CacheDir: t.TempDir(), Worker: path,
		WorkerIdle: time.Minute, ServerDir: dir}
	var stderr bytes.Buffer
	rec := record.New(record.Run{Dir: actions[0].Dir})
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }, Record: rec, Self: "/bin/false"}
	if err := RunWith(context.Background(), cfg, env, actions, Options{}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	id, err := workerserver.Own("/bin/false", path)
	if err != nil {
		t.Fatal(err)
	}
	want := "no worker server: the worker server it started exited (exit status 1); its log is " + filepath.Join(workerserver.InstallDir(dir, id), "server.log") +
		"; the workers live for this link only"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	r := rec.Finish(time.Now(), nil)
	for _, a := range r.Actions {
		if a.By() != proc.ByWorker {
			t.Errorf("%s not on the link's own worker: %s", a.Module, a.NotWorker)
		}
	}
	if r.WorkerServer != "" {
		t.Errorf("the record names a server: %q", r.WorkerServer)
	}
}
