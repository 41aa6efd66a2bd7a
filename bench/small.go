package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/machine"
)

// The small part (issue 34's module links): `ld.lld -r` links of a
// project's smallest bitcode modules, growing to all of them, each linked
// by lld's in-process ThinLTO, by `thindist link` and by the thindist-link
// front leaving it to lld (what that costs: each one's start and the
// decision), and by `thindist link` distributing it (on the workers of a warm per-user server, thindist's
// cache emptied of objects before each link, as for a first build). Where
// distributing costs about what in-process does is where
// --in-process-below's default comes from.

// smallMethods are the ways a small link is run, in smallResult.wall's
// order.
var smallMethods = []string{"in-process", "left to lld", "thindist-link", "distributed"}

// smallDistributed is the distributed method's index in smallMethods.
const smallDistributed = 3

// smallLink is one link: the first modules of the project, smallest first.
type smallLink struct {
	modules []string // absolute paths
	bytes   int64
}

type smallResult struct {
	links []smallLink
	wall  [][][]time.Duration // per link, per method, per run
	// same says, per link, whether the distributed object is in-process's
	// byte for byte (left to lld, it must be).
	same []bool
}

// smallTargets are the bitcode sizes the links grow through: each link is
// the fewest smallest modules that reach one, and the last is all of them.
var smallTargets = []int64{4 << 10, 16 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20}

func benchSmall(ctx context.Context, t *tools, o *options, p *project) (*smallResult, error) {
	dir := filepath.Join(o.work, p.name+"-small")
	mods, err := bitcodeModules(ctx, t, p, filepath.Join(dir, "members"))
	if err != nil {
		return nil, err
	}
	r := &smallResult{}
	var sum int64
	next := 0
	for i, m := range mods {
		sum += m.size
		last := i == len(mods)-1
		if (next < len(smallTargets) && sum >= smallTargets[next]) || last {
			l := smallLink{bytes: sum}
			for _, m := range mods[:i+1] {
				l.modules = append(l.modules, m.path)
			}
			r.links = append(r.links, l)
			for next < len(smallTargets) && sum >= smallTargets[next] {
				next++
			}
		}
	}
	sdir, cache := filepath.Join(dir, "server"), filepath.Join(dir, "cache")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, err
	}
	env := []string{"THINDIST_SERVER_DIR=" + sdir}
	defer serverCmd(ctx, t, env, "stop")
	lld := filepath.Join(filepath.Dir(t.tc.Clang), "ld.lld")
	command := func(method int, l smallLink, out string) []string {
		link := append([]string{lld, "-r", fmt.Sprintf("--thinlto-jobs=%d", o.jobs), "-o", out}, l.modules...)
		switch method {
		case 0:
			return link
		case 1:
			return append([]string{t.thindist, "link", "--quiet", "--in-process-below=1T", "--"}, link...)
		case 2:
			return append([]string{t.front, "--quiet", "--in-process-below=1T", "--"}, link...)
		}
		return append([]string{t.thindist, "link", "--quiet", "--in-process-below=0", fmt.Sprintf("--jobs=%d", o.jobs),
			"--worker=" + t.worker, "--cache-dir=" + cache, "--"}, link...)
	}
	// Untimed: start the server, check that the link left to lld makes
	// in-process's object, and note whether the distributed one does: for
	// -r links of PIC modules it may not (docs/link.md, "Not done").
	for _, l := range r.links {
		same := true
		var want []byte
		for m := range smallMethods {
			out := filepath.Join(dir, fmt.Sprintf("check%d.o", m))
			if _, err := runTimed(ctx, dir, env, command(m, l, out)); err != nil {
				return nil, err
			}
			got, err := os.ReadFile(out)
			if err != nil {
				return nil, err
			}
			switch {
			case m == 0:
				want = got
			case bytes.Equal(got, want):
			case m != smallDistributed:
				return nil, fmt.Errorf("%d modules: the object left to lld (%s) differs from in-process's", len(l.modules), smallMethods[m])
			default:
				same = false
			}
		}
		r.same = append(r.same, same)
	}
	r.wall = make([][][]time.Duration, len(r.links))
	for i := range r.links {
		r.wall[i] = make([][]time.Duration, len(smallMethods))
	}
	for run := 0; run < o.runs; run++ {
		for i, l := range r.links {
			for k := range smallMethods {
				m := (run + i + k) % len(smallMethods)
				if m == smallDistributed { // no object cached: the links' first build
					for _, d := range []string{"ac", "cas"} {
						os.RemoveAll(filepath.Join(cache, d))
					}
				}
				machine.WaitQuiet(ctx, o.maxBusy, o.settle)
				d, err := runTimed(ctx, dir, env, command(m, l, filepath.Join(dir, "out.o")))
				if err != nil {
					return nil, err
				}
				r.wall[i][m] = append(r.wall[i][m], d)
			}
		}
	}
	return r, nil
}

type sizedModule struct {
	path string
	size int64
}

// bitcodeModules are p's bitcode modules, smallest first: its objects, and
// its archives' members extracted into dir.
func bitcodeModules(ctx context.Context, t *tools, p *project, dir string) ([]sizedModule, error) {
	paths := slices.Clone(p.build.Objects)
	for i, a := range p.build.Archives {
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		abs := a
		if !filepath.IsAbs(a) {
			abs = filepath.Join(p.build.Dir, a)
		}
		cmd := exec.CommandContext(ctx, t.tc.AR, "x", abs)
		cmd.Dir = d
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("extracting %s: %v\n%s", a, err, out)
		}
		es, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			paths = append(paths, filepath.Join(d, e.Name()))
		}
	}
	var mods []sizedModule
	for _, path := range paths {
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.build.Dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(data, []byte("BC\xc0\xde")) {
			mods = append(mods, sizedModule{path, int64(len(data))})
		}
	}
	slices.SortFunc(mods, func(a, b sizedModule) int {
		return cmp.Or(cmp.Compare(a.size, b.size), strings.Compare(a.path, b.path))
	})
	if len(mods) == 0 {
		return nil, fmt.Errorf("%s has no bitcode module", p.name)
	}
	return mods, nil
}

// runTimed runs argv in dir with env added to this process's environment
// and returns how long it took; its error quotes argv and what it printed.
func runTimed(ctx context.Context, dir string, env, argv []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %v\n%s", argv, err, out.Bytes())
	}
	return time.Since(start), nil
}
