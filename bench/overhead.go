package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// overheadResult is thindist's own cost on a job file whose compiler does
// nothing.
type overheadResult struct {
	jobs, parallel int
	runs           []overheadRun
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
	res := &overheadResult{jobs: n, parallel: parallel}
	for i := 0; i < runs; i++ {
		waitQuiet(ctx, o.maxBusy, o.settle)
		// --no-cache: the distributor, not the cache (on by default since
		// issue 3, it would hash and store every no-op job).
		r, err := runMeasured(ctx, dir, t.thindist, fmt.Sprintf("--jobs=%d", parallel), "--no-cache", jobFile)
		if err != nil {
			return nil, err
		}
		res.runs = append(res.runs, r)
		fmt.Fprintf(os.Stderr, "bench: overhead run %d: wall %.3f s, thindist CPU %.3f s, RSS %.1f MiB\n",
			i+1, r.wall.Seconds(), r.self.Seconds(), float64(r.maxRSS)/(1<<20))
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

// runMeasured runs the command and separates its own CPU time from its
// children's: once it has exited, and before reaping it, /proc/PID/stat
// still holds utime/stime (the process itself) and cutime/cstime (the
// children it waited for).
func runMeasured(ctx context.Context, dir, name string, args ...string) (overheadRun, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return overheadRun{}, err
	}
	pid := cmd.Process.Pid
	var info [128]byte // siginfo_t
	for {
		const pPID = 1
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			cmd.Wait()
			return overheadRun{}, fmt.Errorf("waitid: %v", errno)
		}
		break
	}
	wall := time.Since(start)
	stat, statErr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	err := cmd.Wait()
	if err != nil {
		return overheadRun{}, fmt.Errorf("%s: %v\n%s", name, err, stderr.Bytes())
	}
	if statErr != nil {
		return overheadRun{}, statErr
	}
	// Fields after the parenthesised command name: state is field 3;
	// utime, stime, cutime, cstime are fields 14–17.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i-3], 10, 64)
		return time.Duration(v) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	r := overheadRun{wall: wall, self: tick(14) + tick(15), children: tick(16) + tick(17)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024
	}
	return r, nil
}

func (o *overheadResult) medians() (wall, self, children time.Duration, rss int64) {
	var ws, ss, cs []time.Duration
	for _, r := range o.runs {
		ws, ss, cs = append(ws, r.wall), append(ss, r.self), append(cs, r.children)
		rss = max(rss, r.maxRSS)
	}
	return median(ws), median(ss), median(cs), rss
}

func (o *overheadResult) text() string {
	wall, self, children, rss := o.medians()
	return fmt.Sprintf("\ndistributor overhead: %d no-op jobs, --jobs=%d, medians of %d runs (RSS: the largest)\n"+
		"  wall %s; thindist CPU %s = %.3f ms/job (target ≤ 2); peak RSS %.1f MiB (target ≤ 40); no-op compilers' CPU %.3f ms/job\n",
		o.jobs, o.parallel, len(o.runs), sec(wall), sec(self), perJob(self, o.jobs), float64(rss)/(1<<20), perJob(children, o.jobs))
}

func (o *overheadResult) markdown() string {
	wall, self, children, rss := o.medians()
	var b strings.Builder
	fmt.Fprintf(&b, "thindist on a synthetic lld job file of %d jobs (three imports each) whose compiler only writes a 64-byte ELF ET_REL header, --jobs=%d --no-cache, medians of %d runs (RSS: the largest). ", o.jobs, o.parallel, len(o.runs))
	b.WriteString("thindist's CPU is its own user+system time without its children's (/proc/PID/stat utime+stime, read after exit and before reaping); RSS is ru_maxrss.\n\n")
	b.WriteString("| wall | thindist CPU | CPU per job (≤ 2 ms) | peak RSS (≤ 40 MiB) | no-op compilers' CPU per job |\n|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %s | %s | %.3f ms | %.1f MiB | %.3f ms |\n", sec(wall), sec(self), perJob(self, o.jobs), float64(rss)/(1<<20), perJob(children, o.jobs))
	return b.String()
}

func perJob(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}
