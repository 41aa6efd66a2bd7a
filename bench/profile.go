package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/cli"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/sys/gctune"
	"github.com/thindist/thindist/internal/sys/jobserver"
)

// profileOverhead runs thindist's code in this process (cli.Main, exactly what
// the thindist binary runs) on the no-op job file under the CPU profiler, to
// show where the distributor's own time goes.
func profileOverhead(ctx context.Context, t *tools, o *options, dir string) error {
	jobFile, err := writeNoopJobFile(dir, t.noopcc, o.overheadJobs)
	if err != nil {
		return err
	}
	if err := os.Chdir(dir); err != nil {
		return err
	}
	f, err := os.Create(o.pprof)
	if err != nil {
		return err
	}
	defer f.Close()
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	runtime.MemProfileRate = 4096
	code := cli.Main(ctx, []string{fmt.Sprintf("--jobs=%d", o.jobs), "--no-cache", jobFile}, pipeline.StdEnv(jobserver.Inherited{}))
	pprof.StopCPUProfile()
	if hf, err := os.Create(o.pprof + ".allocs"); err == nil {
		pprof.Lookup("allocs").WriteTo(hf, 0)
		hf.Close()
	}
	wall := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if code != 0 {
		return fmt.Errorf("thindist exited %d", code)
	}
	cpu := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	fmt.Printf("in-process thindist on %d no-op jobs: wall %s, CPU %s (%.3f ms/job; user %s, sys %s); profiles in %s and %[7]s.allocs\n",
		o.overheadJobs, sec(wall), sec(cpu), perJob(cpu, o.overheadJobs),
		sec(time.Duration(after.Utime.Nano()-before.Utime.Nano())), sec(time.Duration(after.Stime.Nano()-before.Stime.Nano())), o.pprof)
	return nil
}

// distributorProfiled is this program standing in for the thindist binary as
// lld's distributor (-distributor-pprof FILE -- THINDIST-ARGS...): thindist's
// code (cli.Main) under the CPU profiler, for the cluster simulation; what
// it allocated goes to FILE.allocs.
func distributorProfiled(ctx context.Context, path string, args []string) int {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer f.Close()
	// The collector runs as in the thindist binary (cmd/thindist), whose
	// CPU the profile stands for: with Go's default target it would collect
	// at another rate.
	gc := gctune.Start(os.Getenv)
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	runtime.MemProfileRate = 64 << 10
	env := pipeline.StdEnv(jobserver.Inherited{}) // the benchmarks do not run under make
	env.GC = gc
	code := cli.Main(ctx, args, env)
	pprof.StopCPUProfile()
	if hf, err := os.Create(path + ".allocs"); err == nil {
		pprof.Lookup("allocs").WriteTo(hf, 0)
		hf.Close()
	}
	return code
}
