package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Issue 50's first target: a fully cached relink, every backend a hit of
// thindist's local cache, against lld in-process with its own warm
// --thinlto-cache-dir on the same objects. Both caches are filled by one
// link each first; then the two relinks alternate, -runs times.
//
// Wall times are reported but the figures to trust on a shared machine are
// CPU times (user+system, the kernel's accounting): the whole link's
// (clang's driver, lld, the distributor and all they waited for), and,
// for the DTLTO link, thindist's own apart from its children (timewrap).
// lld's part of a DTLTO link (the thin link, writing the shards and the
// job file, the final link) is the rest.
//
// It also measures what the work directory's file system costs per new
// file, hard link, unlink and utimensat (measureFS), the operations whose
// counts differ between the two relinks.
//
// -hits-profile DIR adds, after the timed runs, one relink with thindist's
// code under the CPU profiler (DIR/PROJECT.pprof, `go tool pprof -top`)
// and one relink of each kind under `strace -f -c` (DIR/PROJECT.strace.*):
// the syscalls a relink makes, counted, which a loaded machine does not
// disturb.

// hitsRun is one timed relink.
type hitsRun struct {
	wall, cpu time.Duration // the whole link's
	// self is thindist's own CPU (DTLTO only), children excluded.
	self time.Duration
	hits int // thindist's cache hits, from its summary line
}

type hitsResult struct {
	// fs is what the work directory's file system costs per operation.
	fs       fsCosts
	backends int
	thindist []hitsRun
	lld      []hitsRun
	// strace is each kind's `strace -c -f` total line (calls, errors), if
	// profiled.
	strace [2]string
	pprof  string
	// phases are lld's --time-trace totals of one more relink, DTLTO
	// and in-process.
	phases [2]lldPhases
}

var hitsOf = regexp.MustCompile(`(\d+) (?:of \d+ )?(?:cached|cache hits?|from the cache)`)

// hitsArgs are the driver flags of a fully cached relink: thindist with its
// cache in dir (dist wraps thindist: timewrap and its record, or a
// profiler), or lld in-process with its own.
func hitsArgs(t *tools, o *options, dir string, thindist bool, dist ...string) []string {
	if !thindist {
		return []string{fmt.Sprintf("-Wl,--thinlto-jobs=%d", o.jobs), "-Wl,--thinlto-cache-dir=" + filepath.Join(dir, "lld")}
	}
	var a []string
	if len(dist) == 0 {
		dist = []string{t.thindist}
	}
	a = append(a, "-fthinlto-distributor="+dist[0])
	for _, d := range dist[1:] {
		a = append(a, "-Xthinlto-distributor="+d)
	}
	return append(a, fmt.Sprintf("-Xthinlto-distributor=--jobs=%d", o.jobs),
		"-Xthinlto-distributor=--cache-dir="+filepath.Join(dir, "thindist"))
}

// runHits measures the hits part on each project.
func runHits(ctx context.Context, t *tools, o *options) error {
	for _, name := range o.projects {
		p, err := setupProject(ctx, t, filepath.Join(o.work, name), name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		h, err := benchHits(ctx, t, o, p)
		if err != nil {
			return fmt.Errorf("%s: cached relink: %w", name, err)
		}
		fmt.Print(h.text(p.name))
	}
	return nil
}

func benchHits(ctx context.Context, t *tools, o *options, p *project) (*hitsResult, error) {
	b := p.build
	dir := filepath.Join(b.Dir, "..", filepath.Base(b.Dir)+"-hits")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := "bench-hits.out"
	rec := filepath.Join(dir, "distributor.rec")
	link := func(thindist bool, dist ...string) (hitsRun, string, error) {
		os.Remove(filepath.Join(b.Dir, out))
		tm, err := timed(ctx, b.Dir, nil, t.tc.Clang, b.LinkArgs(out, hitsArgs(t, o, dir, thindist, dist...)...)...)
		if err == nil {
			err = p.check(ctx, filepath.Join(b.Dir, out))
		}
		r := hitsRun{wall: tm.wall, cpu: tm.cpu}
		return r, string(tm.output), err
	}
	// Fill both caches.
	if _, _, err := link(true); err != nil {
		return nil, fmt.Errorf("filling thindist's cache: %w", err)
	}
	if _, _, err := link(false); err != nil {
		return nil, fmt.Errorf("filling lld's cache: %w", err)
	}
	r := &hitsResult{backends: b.Modules}
	var err error
	if r.fs, err = measureFS(filepath.Join(dir, "fs")); err != nil {
		return nil, err
	}
	for run := 0; run < o.runs; run++ {
		for k := 0; k < 2; k++ {
			thindist := (run+k)%2 == 0
			if !thindist {
				h, _, err := link(false)
				if err != nil {
					return nil, fmt.Errorf("lld cached relink: %w", err)
				}
				r.lld = append(r.lld, h)
				fmt.Fprintf(os.Stderr, "bench: %s run %d lld cached relink: wall %s, CPU %s\n", b.Name, run+1, sec(h.wall), sec(h.cpu))
				continue
			}
			os.Remove(rec)
			h, output, err := link(true, t.timewrap, rec, t.thindist)
			if err != nil {
				return nil, fmt.Errorf("thindist cached relink: %w", err)
			}
			w, err := readWrapRecord(rec)
			if err != nil {
				return nil, err
			}
			h.self = w.self
			if m := hitsOf.FindStringSubmatch(summaryLine.FindString(output)); m != nil {
				h.hits, _ = strconv.Atoi(m[1])
			}
			r.thindist = append(r.thindist, h)
			fmt.Fprintf(os.Stderr, "bench: %s run %d thindist cached relink: wall %s, CPU %s (thindist %s); %s\n",
				b.Name, run+1, sec(h.wall), sec(h.cpu), sec(h.self), summaryLine.FindString(output))
		}
	}
	if err := r.tracePhases(ctx, t, o, p, dir, out); err != nil {
		return nil, fmt.Errorf("lld's time trace: %w", err)
	}
	if o.hitsProfile != "" {
		if err := r.profile(ctx, t, o, p, dir, out, link); err != nil {
			return nil, fmt.Errorf("profiling: %w", err)
		}
	}
	return r, nil
}

// profile relinks once with thindist's code profiled and once each under
// strace.
func (r *hitsResult) profile(ctx context.Context, t *tools, o *options, p *project, dir, out string,
	link func(bool, ...string) (hitsRun, string, error)) error {
	pdir, err := filepath.Abs(o.hitsProfile)
	if err == nil {
		err = os.MkdirAll(pdir, 0o755)
	}
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r.pprof = filepath.Join(pdir, p.build.Name+".pprof")
	if _, _, err := link(true, self, "-distributor-pprof", r.pprof, "--"); err != nil {
		return err
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: no strace: syscalls not counted\n")
		return nil
	}
	for i, thindist := range []bool{true, false} {
		file := filepath.Join(pdir, p.build.Name+".strace."+[]string{"thindist", "lld"}[i])
		os.Remove(filepath.Join(p.build.Dir, out))
		args := append([]string{"-f", "-c", "-o", file, t.tc.Clang}, p.build.LinkArgs(out, hitsArgs(t, o, dir, thindist)...)...)
		if _, err := timed(ctx, p.build.Dir, nil, strace, args...); err != nil {
			return err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		r.strace[i] = strings.Join(strings.Fields(lines[len(lines)-1]), " ")
	}
	return nil
}

func medianOf(runs []hitsRun, f func(hitsRun) time.Duration) time.Duration {
	var xs []time.Duration
	for _, r := range runs {
		xs = append(xs, f(r))
	}
	return median(xs)
}

func (r *hitsResult) text(name string) string {
	var b strings.Builder
	wall := func(h hitsRun) time.Duration { return h.wall }
	cpu := func(h hitsRun) time.Duration { return h.cpu }
	self := func(h hitsRun) time.Duration { return h.self }
	lldPart := func(h hitsRun) time.Duration { return h.cpu - h.self }
	tc, lc := medianOf(r.thindist, cpu), medianOf(r.lld, cpu)
	n := time.Duration(max(r.backends, 1))
	hits := 0
	if len(r.thindist) > 0 {
		hits = r.thindist[len(r.thindist)-1].hits
	}
	fmt.Fprintf(&b, "The work directory's file system, CPU per operation (this process, 400 of each): %s\n", r.fs)
	fmt.Fprintf(&b, "Fully cached relink, %s (%d modules; thindist: %d hits in the last run), median of %d:\n", name, r.backends, hits, len(r.thindist))
	fmt.Fprintf(&b, "  thindist (DTLTO) CPU %s = %.3f ms/backend (thindist itself %s = %.3f ms/backend; lld and the driver %s); wall %s\n",
		sec(tc), perBackend(tc, n), sec(medianOf(r.thindist, self)), perBackend(medianOf(r.thindist, self), n),
		sec(medianOf(r.thindist, lldPart)), sec(medianOf(r.thindist, wall)))
	fmt.Fprintf(&b, "  lld in-process, warm --thinlto-cache-dir: CPU %s = %.3f ms/backend; wall %s\n", sec(lc), perBackend(lc, n), sec(medianOf(r.lld, wall)))
	if lc > 0 {
		fmt.Fprintf(&b, "  CPU ratio %.2fx; extra %.3f ms/backend\n", float64(tc)/float64(lc), perBackend(tc-lc, n))
	}
	r.phasesText(&b)
	if r.pprof != "" {
		fmt.Fprintf(&b, "  profile: go tool pprof -top %s\n", r.pprof)
	}
	for i, s := range r.strace {
		if s != "" {
			fmt.Fprintf(&b, "  strace -f -c, %s: %s\n", []string{"thindist", "lld"}[i], s)
		}
	}
	return b.String()
}

func perBackend(d, n time.Duration) float64 {
	return float64(d) / float64(n) / float64(time.Millisecond)
}

// fsCosts are the CPU times of file operations a relink makes many of:
// lld writes a shard file per backend, a hit links its object.
type fsCosts struct {
	create, link, unlink, touch time.Duration
}

func (f fsCosts) String() string {
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
	return fmt.Sprintf("a new 2 KB file %s, a hard link %s, an unlink %s, a utimensat %s", us(f.create), us(f.link), us(f.unlink), us(f.touch))
}

// measureFS measures fsCosts in dir, 400 files at a time, in this process
// (its user+system CPU time: the machine's load does not count).
func measureFS(dir string) (fsCosts, error) {
	const n = 400
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fsCosts{}, err
	}
	defer os.RemoveAll(dir)
	data := make([]byte, 2000)
	name := func(kind string, i int) string { return filepath.Join(dir, fmt.Sprintf("%s%d", kind, i)) }
	var firstErr error
	each := func(f func(i int) error) time.Duration {
		before := selfCPU()
		for i := 0; i < n; i++ {
			if err := f(i); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		return (selfCPU() - before) / n
	}
	var c fsCosts
	c.create = each(func(i int) error { return os.WriteFile(name("f", i), data, 0o644) })
	c.link = each(func(i int) error { return os.Link(name("f", i), name("l", i)) })
	c.touch = each(func(i int) error { now := time.Now(); return os.Chtimes(name("f", i), now, now) })
	c.unlink = each(func(i int) error { return os.Remove(name("l", i)) })
	return c, firstErr
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
