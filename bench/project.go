package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
	"github.com/thindist/thindist/internal/testsupport/realproj"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// project is a set of bitcode objects ready for their final link, and a way
// to tell that a linked binary works.
type project struct {
	name  string
	build *realproj.Build
	check func(ctx context.Context, exe string) error
	// change and restore swap in and out the objects of a one-source
	// change (one module's source edited, that one object recompiled; see
	// change.go), prepared once by setupProject.
	change, restore func() error
	// changeDesc says what the change is.
	changeDesc string
	// checkChanged checks a binary linked with the change in place.
	checkChanged func(ctx context.Context, exe string) error
}

func setupProject(ctx context.Context, t *tools, dir, name string) (*project, error) {
	switch {
	case name == "lua":
		src, err := realproj.FindSource(realproj.LuaPackage)
		if err != nil {
			return nil, err
		}
		b, err := realproj.BuildLua(ctx, t.tc, src, dir)
		if err != nil {
			return nil, err
		}
		p := &project{name: "lua5.4", build: b, check: func(ctx context.Context, exe string) error {
			return expectOutput(ctx, dir, "Lua 5.4\t42\n", exe, "-e", `print(_VERSION, ("%d"):format(6*7))`)
		}}
		if err := prepareLuaChange(ctx, t, p, src); err != nil {
			return nil, fmt.Errorf("preparing the one-source change: %w", err)
		}
		return p, nil
	case name == "7zip":
		src, err := realproj.FindSource(realproj.SevenZipPackage)
		if err != nil {
			return nil, err
		}
		b, err := realproj.BuildSevenZip(ctx, t.tc, src, dir)
		if err != nil {
			return nil, err
		}
		return &project{name: "7-Zip (C++, -g)", build: b, check: func(ctx context.Context, exe string) error {
			return sevenZipRoundTrip(ctx, dir, exe)
		}}, nil
	case name == "hello":
		return setupHello(ctx, t, dir)
	case strings.HasPrefix(name, "gen"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "gen"))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("unknown project %q (want lua or genN, N ≥ 2)", name)
		}
		// testprog.Generate (as merged from e2e) does not create dir itself.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err := testprog.Generate(dir, testprog.Options{Modules: n, Seed: 1})
		if err != nil {
			return nil, err
		}
		// A kept work directory (-keep -work) holds the objects of an
		// earlier run: Generate wrote the same sources again.
		compiled := filepath.Join(dir, ".bench-compiled")
		if !objectsExist(p.Dir, p.Objects) || !fileExists(compiled) {
			if err := p.Compile(ctx, t.tc.Clang); err != nil {
				return nil, err
			}
			if err := os.WriteFile(compiled, nil, 0o644); err != nil {
				return nil, err
			}
		}
		b := &realproj.Build{Name: name, Dir: p.Dir, Objects: p.Objects, CFlags: []string{"-O2"}, Modules: len(p.Modules)}
		q := &project{name: fmt.Sprintf("generated, %d modules", n), build: b, check: func(ctx context.Context, exe string) error {
			return expectOutput(ctx, dir, p.Want, exe)
		}}
		if err := prepareGenChange(ctx, t, q, p); err != nil {
			return nil, fmt.Errorf("preparing the one-source change: %w", err)
		}
		return q, nil
	}
	return nil, fmt.Errorf("unknown project %q (want lua, 7zip, hello or genN)", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func objectsExist(dir string, objs []string) bool {
	for _, o := range objs {
		if !fileExists(filepath.Join(dir, o)) {
			return false
		}
	}
	return true
}

// sevenZipRoundTrip checks a linked 7zz: it archives a file and extracts it
// to its standard output.
func sevenZipRoundTrip(ctx context.Context, dir, exe string) error {
	in := filepath.Join(dir, "roundtrip.txt")
	arc := filepath.Join(dir, "roundtrip.7z")
	want := strings.Repeat("thindist 7-Zip round trip\n", 1000)
	os.Remove(arc)
	if err := os.WriteFile(in, []byte(want), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, exe, "a", "-bd", "-y", arc, in).CombinedOutput(); err != nil {
		return fmt.Errorf("%s a: %v\n%s", exe, err, out)
	}
	return expectOutput(ctx, dir, want, exe, "e", "-so", arc)
}

func expectOutput(ctx context.Context, dir, want, exe string, args ...string) error {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running %s: %v", exe, err)
	}
	if string(out) != want {
		return fmt.Errorf("%s printed %q, want %q", exe, firstBytes(out), firstBytes([]byte(want)))
	}
	return nil
}

func firstBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// timing is one measured command.
type timing struct {
	wall time.Duration
	cpu  time.Duration // user+system of the command and every descendant it waited for
	// others is the share of the machine's CPU that other processes used
	// while it ran (0: the machine was ours).
	others float64
	// interference is the part of others beyond the capacity the command
	// leaves idle by design (a serial command leaves N-1 of N cores to
	// others without being slowed; a parallel one none). It is measured
	// against the method's width, not against the CPU the command did use:
	// a parallel link that others slow down uses less CPU, which must not
	// excuse them.
	interference float64
	// output is the command's standard output and error.
	output []byte
}

// timed runs name args in dir and measures it.
func timed(ctx context.Context, dir string, env []string, name string, args ...string) (timing, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	pr := machine.StartProbe()
	start := time.Now()
	err := cmd.Run()
	t := timing{wall: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			t.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	t.others = pr.Others(t.wall, t.cpu)
	t.output = stderr.Bytes()
	if err != nil {
		return t, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return t, nil
}

// quietTimed is timed on a quiet machine: it waits for quiet first, and
// repeats a run that other processes disturbed by more than
// o.maxInterference (at most o.retries times; the last one counts).
//
// width is how many cores the command is meant to keep busy.
func quietTimed(ctx context.Context, o *options, width int, dir string, env []string, name string, args ...string) (timing, error) {
	var t timing
	slack := max(0, 1-float64(width)/float64(runtime.NumCPU()))
	for attempt := 0; ; attempt++ {
		machine.WaitQuiet(ctx, o.maxBusy, o.settle)
		var err error
		t, err = timed(ctx, dir, env, name, args...)
		t.interference = max(0, t.others-slack)
		if err != nil || t.interference <= o.maxInterference || attempt >= o.retries || ctx.Err() != nil {
			return t, err
		}
		fmt.Fprintf(os.Stderr, "bench: other processes took %.0f%% of the machine from that run; repeating it\n", 100*t.interference)
	}
}

const (
	inProcess    = 0
	serial       = 1
	thindist     = 2
	thindistLink = 3
	thindistExec = 4
)

// projectResult is what benchProject measured.
type projectResult struct {
	p          *project
	jobs       int
	links      [][]timing // per method, per run
	thin       []time.Duration
	final      []time.Duration
	backend    []time.Duration // each backend alone, in job order
	cache      *cacheResult
	remote     *remoteResult
	cluster    *clusterResult
	worker     *workerResult
	small      *smallResult
	concurrent *concurrentResult
	toolchain  *toolchainResult
}
