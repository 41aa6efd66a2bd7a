package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/bench/internal/usage"
)

// The worker part (issue 32): the same link with lld's in-process ThinLTO
// and with thindist's backends exec'd, forked from its fork server, on
// workers started for the link, on a per-user server's workers started by
// the link (cold) and on those of a server an earlier link left running
// (warm). Besides wall and CPU time it counts what all the link's
// processes used, the server's included (which is no descendant of the
// link once it runs): system time, page faults and the peaks of their
// summed resident and proportional set sizes and of the memory they hold,
// each page once.

// runnerMethod is one way of running a link's backends.
type runnerMethod struct {
	name  string
	flags []string // thindist's, after --jobs and --no-cache; nil: in-process
	// server says the link uses the per-user server: cold stops it first,
	// warm starts it first if none runs.
	server      bool
	cold, warm  bool
	description string
}

var runnerMethods = []runnerMethod{
	{name: "in-process", description: "lld's own ThinLTO, --thinlto-jobs=N"},
	{name: "exec", flags: []string{"--no-fork-server", "--no-worker"}, description: "one exec'd clang per backend"},
	{name: "fork server", flags: []string{"--no-worker"}, description: "one clang per backend forked from a pre-started one"},
	{name: "worker, per link", flags: []string{"--worker-idle=0"}, description: "thindist-worker processes started for the link"},
	{name: "worker, cold server", server: true, cold: true, description: "a per-user server started by the link"},
	{name: "worker, warm server", server: true, warm: true, description: "the server an earlier link left running"},
}

// workerRun is one link's figures: wall time and what all its processes
// used.
type workerRun struct {
	wall time.Duration
	use  usage.Usage
}

type workerResult struct {
	runs [][]workerRun // per runnerMethods, per run
	// memory is each runner method's memory run: a link more, untimed,
	// since sampling its peak PSS and peak memory (each page once) slows
	// what it samples (usage.SampleMemory).
	memory []usage.Usage
}

// benchWorker links p's objects with every runner method o.runs times,
// rotating their order, then once more each for its peak memory.
func benchWorker(ctx context.Context, t *tools, o *options, p *project) (*workerResult, error) {
	sdir := filepath.Join(o.work, "server")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, err
	}
	env := []string{"THINDIST_SERVER_DIR=" + sdir}
	defer serverCmd(ctx, t, env, "stop")
	r := &workerResult{runs: make([][]workerRun, len(runnerMethods)), memory: make([]usage.Usage, len(runnerMethods))}
	for run := 0; run < o.runs; run++ {
		for k := range runnerMethods {
			i := (run + k) % len(runnerMethods)
			m := runnerMethods[i]
			wr, err := m.prepareAndLink(ctx, t, o, p, env, false)
			if err != nil {
				return nil, err
			}
			r.runs[i] = append(r.runs[i], wr)
			fmt.Fprintf(os.Stderr, "bench: %s run %d %-20s %7.3f s, CPU %s, sys %s, %d faults, peak RSS %d MiB\n",
				p.build.Name, run+1, m.name, wr.wall.Seconds(), sec(wr.use.User+wr.use.Sys), sec(wr.use.Sys),
				wr.use.Faults, wr.use.PeakRSS>>20)
		}
	}
	for i, m := range runnerMethods {
		wr, err := m.prepareAndLink(ctx, t, o, p, env, true)
		if err != nil {
			return nil, err
		}
		r.memory[i] = wr.use
		fmt.Fprintf(os.Stderr, "bench: %s memory run %-20s peak PSS %s, peak memory %s (RSS %d MiB)\n", p.build.Name, m.name,
			mib(wr.use.PeakPSS), mib(wr.use.PeakMemory), wr.use.PeakRSS>>20)
	}
	return r, nil
}

// args is the clang link line of m.
func (m runnerMethod) args(t *tools, o *options, p *project) []string {
	if m.flags == nil && !m.server {
		return p.build.LinkArgs("bench.out", fmt.Sprintf("-Wl,--thinlto-jobs=%d", o.jobs))
	}
	extra := []string{"-fthinlto-distributor=" + t.thindist, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", o.jobs),
		"-Xthinlto-distributor=--no-cache", "-Xthinlto-distributor=--worker=" + t.worker}
	for _, f := range m.flags {
		extra = append(extra, "-Xthinlto-distributor="+f)
	}
	return p.build.LinkArgs("bench.out", extra...)
}

// prepare stops the server before a cold link, and has one running before
// a warm one (an untimed link starts it).
func (m runnerMethod) prepare(ctx context.Context, t *tools, o *options, p *project, env []string) error {
	switch {
	case m.cold:
		return serverCmd(ctx, t, env, "stop")
	case m.warm && serverPid(ctx, t, env) == 0:
		_, err := m.run(ctx, t, o, p, env, 0, false)
		return err
	}
	return nil
}

// prepareAndLink is prepare, then link.
func (m runnerMethod) prepareAndLink(ctx context.Context, t *tools, o *options, p *project, env []string, memory bool) (workerRun, error) {
	if err := m.prepare(ctx, t, o, p, env); err != nil {
		return workerRun{}, fmt.Errorf("%s: %w", m.name, err)
	}
	wr, err := m.link(ctx, t, o, p, env, memory)
	if err != nil {
		return wr, fmt.Errorf("%s link: %w", m.name, err)
	}
	return wr, nil
}

// link is one link of m, on a quiet machine, its output checked; with
// memory its peak memory is sampled too, and its time is not to be
// reported.
func (m runnerMethod) link(ctx context.Context, t *tools, o *options, p *project, env []string, memory bool) (workerRun, error) {
	machine.WaitQuiet(ctx, o.maxBusy, o.settle)
	server := 0
	if m.server {
		server = serverPid(ctx, t, env)
	}
	wr, err := m.run(ctx, t, o, p, env, server, memory)
	if err != nil {
		return wr, err
	}
	return wr, p.check(ctx, filepath.Join(p.build.Dir, "bench.out"))
}

// run links once and measures the link's processes and, when server is
// not 0 or the link starts one, the server's; their peak PSS and peak
// memory too with memory.
func (m runnerMethod) run(ctx context.Context, t *tools, o *options, p *project, env []string, server int, memory bool) (workerRun, error) {
	os.Remove(filepath.Join(p.build.Dir, "bench.out"))
	cmd := exec.CommandContext(ctx, t.tc.Clang, m.args(t, o, p)...)
	cmd.Dir, cmd.Env = p.build.Dir, append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var before usage.Usage
	roots := []int{}
	if server != 0 {
		usage.SameAutogroupNice(server)
		before, roots = usage.Tree(server), []int{server}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return workerRun{}, err
	}
	sample := usage.SampleRSS
	if memory {
		sample = usage.SampleMemory
	}
	s := sample(10*time.Millisecond, roots...)
	s.Add(cmd.Process.Pid)
	err := cmd.Wait()
	wr := workerRun{wall: time.Since(start)}
	peak := s.Stop()
	if err != nil {
		return wr, fmt.Errorf("%v\n%s", err, out.Bytes())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		wr.use = usage.Usage{User: time.Duration(ru.Utime.Nano()), Sys: time.Duration(ru.Stime.Nano()),
			Faults: ru.Minflt + ru.Majflt}
	}
	if m.server {
		if server == 0 { // started by this link: all it used is the link's
			server = serverPid(ctx, t, env)
		}
		if server != 0 {
			wr.use = wr.use.Add(usage.Tree(server).Sub(before))
		}
	}
	wr.use.PeakRSS, wr.use.PeakPSS, wr.use.PeakMemory = peak.PeakRSS, peak.PeakPSS, peak.PeakMemory
	return wr, nil
}

// serverPid is the pid of the per-user server env names, 0 if none runs.
func serverPid(ctx context.Context, t *tools, env []string) int {
	cmd := exec.CommandContext(ctx, t.thindist, "server", "status", "--json")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	// A list, one server an installation: the bench runs one thindist.
	var sts []struct {
		Pid int `json:"pid"`
	}
	json.Unmarshal(out, &sts)
	if len(sts) == 0 {
		return 0
	}
	return sts[0].Pid
}

func serverCmd(ctx context.Context, t *tools, env []string, verb string) error {
	cmd := exec.CommandContext(ctx, t.thindist, "server", verb)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("thindist server %s: %v\n%s", verb, err, out)
	}
	return nil
}
