package schedule

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/thindist/thindist/internal/executor"
)

// TestStaleStagingRemoved: a run removes the staging directories that
// runs which have ended left in its output directory (killed runs cannot
// remove their own), and keeps those of live runs and those it cannot
// judge.
func TestStaleStagingRemoved(t *testing.T) {
	me, err := self()
	if err != nil {
		t.Fatal(err)
	}
	// A process that has ended, for a PID that is free.
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	// A live process other than this one.
	live := exec.Command("sleep", "600")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	liveStart, err := startTime(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*owner)) string {
		o := me
		f(&o)
		return stagingPrefix + o.String() + "-123" + stagingSuffix
	}
	dir := t.TempDir()
	stale := []string{
		with(func(o *owner) { o.pid = ended.Process.Pid }),                     // its run ended
		with(func(o *owner) { o.start += "0" }),                                // this PID, reused
		with(func(o *owner) { o.pid, o.start = live.Process.Pid, "1" }),        // that PID, reused
		with(func(o *owner) { o.boot = "00000000"; o.pid = live.Process.Pid }), // before a reboot
	}
	kept := []string{
		with(func(*owner) {}), // this run's own (another of its directories)
		with(func(o *owner) { o.pid, o.start = live.Process.Pid, liveStart }),
		with(func(o *owner) { o.host = "ffffffff"; o.pid = ended.Process.Pid }), // another machine's
		with(func(o *owner) { o.ns = "1"; o.pid = ended.Process.Pid }),          // another container's
		".thindist-1234.tmp", // an older thindist's: cannot tell
	}
	for _, d := range append(append([]string{}, stale...), kept...) {
		if err := os.MkdirAll(filepath.Join(dir, d, "sandbox-1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	as := actions(t, dir, 1)
	write := executor.Func(func(_ context.Context, j executor.Job) (*executor.Result, error) {
		a, out := j.Action, j.Out
		return &executor.Result{}, os.WriteFile(out[0], []byte(a.ID), 0o644)
	})
	if err := Run(context.Background(), as, write, Options{Parallel: 1}); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	sort.Strings(left)
	sort.Strings(kept)
	if !slices.Equal(left, kept) {
		t.Errorf("left %q\nwant %q", left, kept)
	}
}
