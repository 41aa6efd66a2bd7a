package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
)

// overheadResult is thindist's own cost on a job file whose compiler does
// nothing.
type overheadResult struct {
	jobs, parallel int
	modes          []overheadMode
}

// overheadMode is one way thindist starts the compilers: forked from a
// server (the default) or exec'd (--no-fork-server). Forked, the server's
// own work (a fork and a wait per job) is one of thindist's children, so
// its CPU is in the children's column with the no-op compilers'.
type overheadMode struct {
	name  string
	flags []string
	runs  []overheadRun
}

type overheadRun struct {
	wall     time.Duration
	self     time.Duration // thindist's own user+system CPU, children excluded
	children time.Duration // the no-op compilers' CPU
	maxRSS   int64         // bytes: peak RSS of thindist (its children are far smaller)
}

// measureOverhead writes a synthetic lld-style job file of n jobs (modules of
// varied sizes, an index shard each, three imports each) whose compiler is the
// no-op compiler, and runs thindist on it.
func measureOverhead(ctx context.Context, t *tools, o *options, dir string, n, parallel, runs int) (*overheadResult, error) {
	jobFile, err := writeNoopJobFile(dir, t.noopcc, n)
	if err != nil {
		return nil, err
	}
	res := &overheadResult{jobs: n, parallel: parallel, modes: []overheadMode{
		{name: "forked (default)"},
		{name: "exec'd (--no-fork-server)", flags: []string{"--no-fork-server"}},
	}}
	for i := 0; i < runs; i++ {
		// Alternate which mode goes first: every run leaves 10,000 deleted
		// files behind, and the file system slows down from run to run.
		for k := range res.modes {
			mode := &res.modes[(i+k)%len(res.modes)]
			machine.WaitQuiet(ctx, o.maxBusy, o.settle)
			// --no-cache: the distributor, not the cache (on by default since
			// issue 3, it would hash and store every no-op job).
			args := append([]string{fmt.Sprintf("--jobs=%d", parallel), "--no-cache"}, mode.flags...)
			r, err := runMeasured(ctx, t, dir, t.thindist, append(args, jobFile)...)
			if err != nil {
				return nil, err
			}
			mode.runs = append(mode.runs, r)
			fmt.Fprintf(os.Stderr, "bench: overhead run %d, %s: wall %.3f s, thindist CPU %.3f s, children %.3f s, RSS %.1f MiB\n",
				i+1, mode.name, r.wall.Seconds(), r.self.Seconds(), r.children.Seconds(), float64(r.maxRSS)/(1<<20))
		}
	}
	return res, nil
}

func writeNoopJobFile(dir, compiler string, n int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rng := rand.New(rand.NewSource(1))
	type job struct {
		Args    []string `json:"args"`
		Inputs  []string `json:"inputs"`
		Outputs []string `json:"outputs"`
	}
	jobs := make([]job, n)
	junk := make([]byte, 8192)
	rng.Read(junk)
	const pid = 424242
	for i := range jobs {
		mod := fmt.Sprintf("m%05d.o", i)
		if err := os.WriteFile(filepath.Join(dir, mod), junk[:256+rng.Intn(len(junk)-256)], 0o644); err != nil {
			return "", err
		}
		out := fmt.Sprintf("m%05d.1.%d.native.o", i, pid)
		shard := out + ".thinlto.bc"
		if err := os.WriteFile(filepath.Join(dir, shard), junk[:64], 0o644); err != nil {
			return "", err
		}
		inputs := []string{mod, shard}
		for k := 0; k < 3; k++ {
			inputs = append(inputs, fmt.Sprintf("m%05d.o", rng.Intn(n)))
		}
		jobs[i] = job{Args: []string{mod, "-fthinlto-index=" + shard, "-o", out}, Inputs: inputs, Outputs: []string{out}}
	}
	file := map[string]any{
		"common": map[string]any{
			"linker_output": "a.out",
			"args": []string{compiler, "-c", "--target=x86_64-pc-linux-gnu", "-O2", "-faddrsig",
				"-ffunction-sections", "-fdata-sections", "-fpic", "-Wno-unused-command-line-argument"},
			"inputs": []string{},
		},
		"jobs": jobs,
	}
	data, err := json.Marshal(file)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("a.%d.dist-file.json", pid))
	return path, os.WriteFile(path, data, 0o644)
}

// runMeasured runs the command through timewrap, which reports its wall
// time, its own CPU time apart from its children's, and its own peak RSS
// (see testdata/timewrap.c for why the benchmark cannot ask the kernel for
// the last one itself).
func runMeasured(ctx context.Context, t *tools, dir, name string, args ...string) (overheadRun, error) {
	rec := filepath.Join(dir, "timewrap.rec")
	os.Remove(rec)
	defer os.Remove(rec)
	cmd := exec.CommandContext(ctx, t.timewrap, append([]string{rec, name}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return overheadRun{}, fmt.Errorf("%s: %v\n%s", name, err, stderr.Bytes())
	}
	w, err := readWrapRecord(rec)
	if err != nil {
		return overheadRun{}, err
	}
	if !w.ran {
		return overheadRun{}, fmt.Errorf("timewrap wrote no record for %s", name)
	}
	return overheadRun{wall: w.wall, self: w.self, children: w.children, maxRSS: w.maxRSS}, nil
}

// wrapRecord is what timewrap recorded of one run.
type wrapRecord struct {
	ran            bool // there was a record
	wall           time.Duration
	self, children time.Duration // CPU, user+system
	selfSystem     time.Duration // the system part of self
	maxRSS         int64         // bytes
}

// readWrapRecord reads the single record timewrap appended to path (none:
// the program was not run).
func readWrapRecord(path string) (wrapRecord, error) {
	var w wrapRecord
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil
	} else if err != nil {
		return w, err
	}
	f := strings.Fields(string(b))
	if len(f) != 5 {
		return w, fmt.Errorf("%s: want one record of 5 fields, got %q", path, b)
	}
	var v [5]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil || v[i] < 0 {
			return w, fmt.Errorf("%s: field %d of %q: bad value", path, i+1, b)
		}
	}
	ticks := func(n int64) time.Duration { return time.Duration(n) * machine.Tick }
	return wrapRecord{ran: true, wall: time.Duration(v[0]), self: ticks(v[1]), children: ticks(v[2]), maxRSS: v[3] << 10, selfSystem: ticks(v[4])}, nil
}

func (m *overheadMode) medians() (wall, self, children time.Duration, rss int64) {
	var ws, ss, cs []time.Duration
	for _, r := range m.runs {
		ws, ss, cs = append(ws, r.wall), append(ss, r.self), append(cs, r.children)
		rss = max(rss, r.maxRSS)
	}
	return median(ws), median(ss), median(cs), rss
}

func (o *overheadResult) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\ndistributor overhead: %d no-op jobs, --jobs=%d, medians of %d runs (RSS: the largest)\n",
		o.jobs, o.parallel, len(o.modes[0].runs))
	for i := range o.modes {
		m := &o.modes[i]
		wall, self, children, rss := m.medians()
		fmt.Fprintf(&b, "  %-26s wall %s; thindist CPU %s = %.3f ms/job (target ≤ 2); peak RSS %.1f MiB (target ≤ 40); children's CPU %.3f ms/job\n",
			m.name, sec(wall), sec(self), perJob(self, o.jobs), float64(rss)/(1<<20), perJob(children, o.jobs))
	}
	return b.String()
}

func (o *overheadResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "thindist on a synthetic lld job file of %d jobs (three imports each) whose compiler only writes a 64-byte ELF ET_REL header, --jobs=%d --no-cache, medians of %d runs (RSS: the largest). ", o.jobs, o.parallel, len(o.modes[0].runs))
	b.WriteString("thindist's CPU is its own user+system time without its children's (/proc/PID/stat utime+stime, read after exit and before reaping); RSS is its own ru_maxrss, thindist started by a small C program with fork and exec (`bench/testdata/timewrap.c`: a child the Go benchmark starts itself reports the benchmark's own peak RSS). ")
	b.WriteString("Forked, the fork server's own work (a fork and a wait per job) is one of thindist's children: it is in the children's column with the no-op compilers'.\n\n")
	b.WriteString("| compilers | wall | thindist CPU | CPU per job (≤ 2 ms) | peak RSS (≤ 40 MiB) | children's CPU per job |\n|---|---:|---:|---:|---:|---:|\n")
	for i := range o.modes {
		m := &o.modes[i]
		wall, self, children, rss := m.medians()
		fmt.Fprintf(&b, "| %s | %s | %s | %.3f ms | %.1f MiB | %.3f ms |\n", m.name, sec(wall), sec(self), perJob(self, o.jobs), float64(rss)/(1<<20), perJob(children, o.jobs))
	}
	return b.String()
}

func perJob(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}
