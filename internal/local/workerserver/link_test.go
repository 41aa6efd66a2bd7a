package workerserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// nextRunner counts the jobs ServerForks passes on.
type nextRunner struct{ n int }

func (r *nextRunner) Run(ctx context.Context, c *proc.Cmd) (*proc.Result, error) {
	r.n++
	return &proc.Result{Stdout: []byte("next\n")}, nil
}

// TestServerForksWithoutServer: a link whose server cannot be started
// warns once, at its first job, uses workers of its own, and runs on next
// what the server would have forked.
func TestServerForksWithoutServer(t *testing.T) {
	var warnings []string
	warn := func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
	o := ConnectOptions{Dir: filepath.Join(t.TempDir(), "server"), Self: "/bin/false", Worker: "/bin/true", Wait: 5 * time.Second}
	lw := NewLinkWorkers(o, worker.Options{Path: "/bin/true"}, func(*Client) { t.Error("a server reached") }, warn)
	defer lw.Close()
	next := &nextRunner{}
	forks := NewServerForks(lw, next)
	if len(warnings) != 0 {
		t.Fatalf("warned before the first job: %q", warnings)
	}
	for range 2 {
		if res, err := forks.Run(t.Context(), &proc.Cmd{Argv: []string{"sh", "-c", "echo forked"}}); err != nil || string(res.Stdout) != "next\n" {
			t.Errorf("%v, %q; want next's result", err, res.Stdout)
		}
	}
	if next.n != 2 || forks.Forked() != 0 {
		t.Errorf("next ran %d of 2 jobs, the server forked %d", next.n, forks.Forked())
	}
	if w, cl := lw.reach(); cl != nil {
		t.Errorf("a client without a server: %v", cl)
	} else if _, ok := w.(*worker.Pool); !ok {
		t.Errorf("the link's workers are %T, want its own Pool", w)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "no worker server: ") || !strings.HasSuffix(warnings[0], "; the workers live for this link only") {
		t.Errorf("warnings %q; want one that the workers live for this link only", warnings)
	}
}

// TestServerForksOnServer: a link that reaches the server says so
// (connected) and forks there what its workers do not take; a job whose
// output streams runs on next.
func TestServerForksOnServer(t *testing.T) {
	base := filepath.Join(t.TempDir(), "server")
	serve(t, base)
	exe, _ := os.Executable()
	var reached *Client
	lw := NewLinkWorkers(ConnectOptions{Dir: base, Self: exe, Worker: testprog.Worker(t)}, worker.Options{},
		func(cl *Client) { reached = cl }, func(f string, a ...any) { t.Errorf("warned: "+f, a...) })
	defer lw.Close()
	next := &nextRunner{}
	forks := NewServerForks(lw, next)
	res, err := forks.Run(t.Context(), &proc.Cmd{Argv: []string{"sh", "-c", "echo forked"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || string(res.Stdout) != "forked\n" || res.By != proc.ByForkServer {
		t.Fatalf("%v, %+v; want the job forked by the server", err, res)
	}
	var streamed strings.Builder
	if _, err := forks.Run(t.Context(), &proc.Cmd{Argv: []string{"true"}, Stdout: &streamed}); err != nil {
		t.Fatal(err)
	}
	if reached == nil || forks.Forked() != 1 || next.n != 1 {
		t.Errorf("reached %v; %d forked by the server, %d run by next; want 1 and 1", reached, forks.Forked(), next.n)
	}
}
