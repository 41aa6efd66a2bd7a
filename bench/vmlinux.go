package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
)

// The vmlinux part (issue 32's kernel target): Kbuild's own `vmlinux.o`
// link of a ThinLTO kernel tree (-kernel DIR, as scripts/kernel-test.sh and
// scripts/kernel-bench.sh leave one), linked by lld's in-process ThinLTO
// and by `thindist link` as installed (the workers of a warm per-user
// server; thindist's cache emptied of objects before each link, as in a
// clean build), in pairs whose order alternates. Then one pair more,
// untimed, says where the difference goes: lld's --time-trace gives each
// module's backend time in-process, thindist's record the same module's
// CPU on a worker and its time in a slot.

// vmlinuxResult is the part's figures.
type vmlinuxResult struct {
	tree   string
	inputs int // backends, from thindist's record
	wall   [2][]time.Duration
	same   bool
	split  *vmlinuxSplit
}

// vmlinuxSplit compares one in-process link with one thindist link module
// by module.
type vmlinuxSplit struct {
	matched                       int           // modules found in both
	inproc, cpu, slot             time.Duration // Σ over them: lld's backend threads; the workers' CPU; thindist's slots
	fixed                         time.Duration // median of cpu − in-process over the modules under 5 ms in-process
	small                         int           // how many those are
	slotOverCPU                   time.Duration // median of slot − cpu
	lldRun, lldWall               time.Duration // lld's "Run ThinLTO" phase, its whole link
	thinLink, backends, finalLink time.Duration // thindist's phases
	thindistWall                  time.Duration
}

// benchVmlinux runs the part on the tree o.kernel.
func benchVmlinux(ctx context.Context, t *tools, o *options) (*vmlinuxResult, error) {
	tree, err := filepath.Abs(o.kernel)
	if err != nil {
		return nil, err
	}
	saved, err := os.ReadFile(filepath.Join(tree, ".vmlinux.o.cmd"))
	if err != nil {
		return nil, fmt.Errorf("-kernel %s: not a built kernel tree: %w", o.kernel, err)
	}
	lld := filepath.Join(filepath.Dir(t.tc.Clang), "ld.lld")
	command, err := kbuildLink(string(saved), lld)
	if err != nil {
		return nil, fmt.Errorf("%s/.vmlinux.o.cmd: %w", tree, err)
	}
	dir := filepath.Join(o.work, "vmlinux")
	sdir, cache := filepath.Join(dir, "server"), filepath.Join(dir, "cache")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, err
	}
	env := []string{"THINDIST_SERVER_DIR=" + sdir}
	defer serverCmd(ctx, t, env, "stop")
	r := &vmlinuxResult{tree: tree}
	link := func(method int, out string, extra ...string) (time.Duration, error) {
		argv := append(append(slices.Clone(command), "-o", out), extra...)
		if method == 0 {
			argv = append(argv, fmt.Sprintf("--thinlto-jobs=%d", o.jobs))
		} else {
			for _, d := range []string{"ac", "cas"} { // no object cached: a clean build
				os.RemoveAll(filepath.Join(cache, d))
			}
			argv = append([]string{t.thindist, "link", "--quiet", fmt.Sprintf("--jobs=%d", o.jobs),
				"--worker=" + t.worker, "--cache-dir=" + cache, "--"}, argv...)
		}
		machine.WaitQuiet(ctx, o.maxBusy, o.settle)
		return runTimed(ctx, tree, env, argv)
	}
	outs := [2]string{filepath.Join(dir, "inproc.o"), filepath.Join(dir, "thindist.o")}
	// Untimed: start the server and compare the objects.
	for m := range outs {
		if _, err := link(m, outs[m]); err != nil {
			return nil, err
		}
	}
	a, err := os.ReadFile(outs[0])
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(outs[1])
	if err != nil {
		return nil, err
	}
	r.same = bytes.Equal(a, b)
	for run := 0; run < o.runs; run++ {
		for k := range 2 {
			m := (run + k) % 2
			d, err := link(m, outs[m])
			if err != nil {
				return nil, err
			}
			r.wall[m] = append(r.wall[m], d)
		}
	}
	// Untimed: where the difference goes.
	trace := filepath.Join(dir, "lld-trace.json")
	lldWall, err := link(0, outs[0], "--time-trace="+trace, "--time-trace-granularity=200")
	if err != nil {
		return nil, err
	}
	thWall, err := link(1, outs[1])
	if err != nil {
		return nil, err
	}
	rec := exec.CommandContext(ctx, t.thindist, "report", "--cache-dir="+cache, "last", "--json")
	rec.Env = append(os.Environ(), env...)
	recJSON, err := rec.Output()
	if err != nil {
		return nil, fmt.Errorf("thindist report: %v", err)
	}
	traceJSON, err := os.ReadFile(trace)
	if err != nil {
		return nil, err
	}
	if r.split, r.inputs, err = splitVmlinux(traceJSON, recJSON); err != nil {
		return nil, err
	}
	r.split.lldWall, r.split.thindistWall = lldWall, thWall
	return r, nil
}

// kbuildLink is the link of Kbuild's saved command (savedcmd_vmlinux.o :=
// LD ARGS; objtool ...), run by lld, without its -o and without a ThinLTO
// cache of lld's (kernels before 6.x passed one): the part times clean
// builds' links.
func kbuildLink(saved, lld string) ([]string, error) {
	_, line, ok := strings.Cut(saved, ":=")
	if !ok {
		return nil, fmt.Errorf("no savedcmd line")
	}
	line, _, _ = strings.Cut(strings.SplitN(line, "\n", 2)[0], ";")
	if strings.ContainsAny(line, `'"\$`) {
		return nil, fmt.Errorf("the link command quotes or expands something; only plain words are understood: %s", line)
	}
	words := strings.Fields(line)
	if len(words) < 2 {
		return nil, fmt.Errorf("no link command")
	}
	argv := []string{lld}
	for i := 1; i < len(words); i++ {
		switch w := strings.TrimLeft(words[i], "-"); {
		case words[i] == "-o" && i+1 < len(words):
			i++
			continue
		case strings.HasPrefix(w, "thinlto-cache-dir=") || strings.HasPrefix(w, "thinlto-cache-policy="):
			continue
		}
		argv = append(argv, words[i])
	}
	if !slices.Contains(argv, "-r") || !slices.Contains(argv, "vmlinux.a") {
		return nil, fmt.Errorf("not vmlinux.o's `ld -r ... vmlinux.a` link: %s", line)
	}
	return argv, nil
}

// member names an archive member as lld does for in-process backends and
// for the objects it has distributed: "vmlinux.a(fork.o at 123456)".
var member = regexp.MustCompile(`\(([^()]*) at (\d+)\)`)

// splitVmlinux matches lld's in-process backends (its time trace) with
// thindist's (its record) by archive member, and returns the comparison
// and how many backends thindist ran. A member name lld gives several
// members of (two fork.o) is matched in offset order; names whose counts
// differ are left out.
func splitVmlinux(traceJSON, recordJSON []byte) (*vmlinuxSplit, int, error) {
	var trace struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Dur  float64 `json:"dur"`
			Args struct {
				Detail string `json:"detail"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(traceJSON, &trace); err != nil {
		return nil, 0, fmt.Errorf("lld's time trace: %v", err)
	}
	var rec struct {
		Actions []struct {
			Output string `json:"output"`
			CPU    int64  `json:"cpu_us"`
			Start  int64  `json:"start_us"`
			End    int64  `json:"end_us"`
		} `json:"actions"`
		Phases []struct {
			Name  string    `json:"name"`
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(recordJSON, &rec); err != nil {
		return nil, 0, fmt.Errorf("thindist's record: %v", err)
	}
	s := &vmlinuxSplit{}
	inproc := map[string][][2]int64{} // name → (offset, µs)
	for _, e := range trace.TraceEvents {
		switch {
		case e.Ph != "X":
		case e.Name == "Run ThinLTO":
			s.lldRun = time.Duration(e.Dur) * time.Microsecond
		case e.Name == "Run ThinLTO backend thread (in-process)":
			if m := member.FindStringSubmatch(e.Args.Detail); m != nil {
				off, _ := strconv.ParseInt(m[2], 10, 64)
				inproc[m[1]] = append(inproc[m[1]], [2]int64{off, int64(e.Dur)})
			}
		}
	}
	type job struct{ offset, cpu, slot int64 }
	dist := map[string][]job{}
	for _, a := range rec.Actions {
		if m := member.FindStringSubmatch(filepath.Base(a.Output)); m != nil {
			off, _ := strconv.ParseInt(m[2], 10, 64)
			dist[m[1]] = append(dist[m[1]], job{off, a.CPU, a.End - a.Start})
		}
	}
	for _, p := range rec.Phases {
		d := p.End.Sub(p.Start)
		switch p.Name {
		case "thin link":
			s.thinLink = d
		case "backends":
			s.backends = d
		case "final link":
			s.finalLink = d
		}
	}
	var fixed, over []time.Duration
	for name, ins := range inproc {
		ds := dist[name]
		if len(ds) != len(ins) {
			continue
		}
		slices.SortFunc(ins, func(x, y [2]int64) int { return int(x[0] - y[0]) })
		slices.SortFunc(ds, func(x, y job) int { return int(x.offset - y.offset) })
		for i := range ins {
			in, cpu, slot := time.Duration(ins[i][1])*time.Microsecond, time.Duration(ds[i].cpu)*time.Microsecond, time.Duration(ds[i].slot)*time.Microsecond
			s.matched++
			s.inproc += in
			s.cpu += cpu
			s.slot += slot
			over = append(over, slot-cpu)
			if in < 5*time.Millisecond {
				fixed = append(fixed, cpu-in)
			}
		}
	}
	if s.matched == 0 {
		return nil, 0, fmt.Errorf("no backend of lld's time trace is in thindist's record")
	}
	s.fixed, s.small, s.slotOverCPU = median(fixed), len(fixed), median(over)
	return s, len(rec.Actions), nil
}
