package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// maxConcurrent reads a fake compiler's $TD_LOG ("s <ns>" at start, "e <ns>"
// at the end of each run) and returns how many ran at once at most, and how
// many ran.
func maxConcurrent(t *testing.T, log string) (max, runs int) {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("bad log line %q", line)
		}
		at, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		d := 1
		if f[0] == "e" {
			d = -1
		} else {
			runs++
		}
		evs = append(evs, ev{at, d})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta // ends first
	})
	cur := 0
	for _, e := range evs {
		cur += e.delta
		if cur > max {
			max = cur
		}
	}
	return max, runs
}

// TestJobserver runs a DTLTO link under `make -j2` with --jobs=8: thindist
// must take make's jobserver tokens and run at most 2 compilers at once.
// The same link outside make, as a control, runs more than 2.
func TestJobserver(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and make is missing")
		}
		t.Skip("no make")
	}
	const modules = 10
	p := program(t, testprog.Options{Modules: modules, Seed: 29})
	fake := fakeCompiler(t, t.TempDir())
	args := []string{driver(p), "-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + thindist,
		"-Xthinlto-distributor=--jobs=8", "-Wl,--thinlto-remote-compiler=" + fake}
	args = append(args, p.Objects...)

	t.Run("control", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "log")
		cmd := exec.Command(args[0], append(args[1:], "-o", "prog-free")...)
		cmd.Dir = p.Dir
		cmd.Env = testEnv(t, "TD_LOG="+log, "TD_SLEEP=0.3", "MAKEFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("link: %v\n%s", err, out)
		}
		max, runs := maxConcurrent(t, log)
		if runs != modules {
			t.Errorf("%d compiles, want %d", runs, modules)
		}
		if max <= 2 {
			t.Errorf("without make, at most %d compilers ran at once; --jobs=8 should allow more", max)
		}
	})

	for _, form := range []string{"pipe", "fifo"} {
		t.Run(form, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			makefile := fmt.Sprintf("all:\n\t+cd %s && %s -o prog-make\n", action.ShellQuote([]string{p.Dir}), action.ShellQuote(args))
			if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o666); err != nil {
				t.Fatal(err)
			}
			margs := []string{"-j2", "-s"}
			if form == "fifo" {
				margs = append(margs, "--jobserver-style=fifo")
			}
			cmd := exec.Command("make", margs...)
			cmd.Dir = dir
			cmd.Env = testEnv(t, "TD_LOG="+log, "TD_SLEEP=0.3", "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			if form == "fifo" && err != nil && strings.Contains(string(out), "jobserver-style") {
				t.Skip("this make has no fifo jobserver (make 4.4+); internal/sys/jobserver tests the fifo form")
			}
			if err != nil {
				t.Fatalf("make: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "not using make's jobserver") {
				t.Errorf("thindist did not use the jobserver:\n%s", out)
			}
			checkBoundedLink(t, p, "prog-make", log, modules, 2, "under make -j2")
		})
	}
}
