package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Check reports why the worker at path cannot stand in for compiler (a
// path or a name looked up in env's PATH, run from dir), "" when it can:
// the compiler's version line and resource directory must be the very ones
// the worker's own clang libraries report for that compiler. A worker built
// against another LLVM, a compiler that is a wrapper script, or one that
// cannot be run fails the check.
//
// Two processes, run at once: `path --probe compiler`, and `compiler -v
// -print-resource-dir`, which prints its version line on stderr (-v) and
// its resource directory on stdout. A compiler named without a slash is
// looked up in env's PATH, as the job's own exec would.
func Check(ctx context.Context, path, compiler, dir string, env []string) string {
	exe, err := lookPath(compiler, dir, env)
	if err != nil {
		return fmt.Sprintf("cannot ask the compiler its version and resource directory (%v)", err)
	}
	type output struct {
		stdout, stderr string
		err            error
	}
	// run runs argv, its program found at exe.
	run := func(exe string, argv ...string) chan output {
		ch := make(chan output, 1)
		go func() {
			cmd := exec.CommandContext(ctx, exe, argv[1:]...)
			cmd.Args[0], cmd.Dir, cmd.Env = argv[0], dir, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil {
				err = fmt.Errorf("%s: %v %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
			}
			ch <- output{stdout.String(), stderr.String(), err}
		}()
		return ch
	}
	probeCh, clangCh := run(path, path, "--probe", compiler), run(exe, compiler, "-v", "-print-resource-dir")
	probe, clang := <-probeCh, <-clangCh
	if probe.err != nil {
		return fmt.Sprintf("the worker cannot be run (%v)", probe.err)
	}
	want := strings.SplitN(probe.stdout, "\n", 3)
	if len(want) < 2 {
		return fmt.Sprintf("the worker's probe printed %q", probe.stdout)
	}
	if clang.err != nil {
		return fmt.Sprintf("cannot ask the compiler its version and resource directory (%v)", clang.err)
	}
	if v, _, _ := strings.Cut(clang.stderr, "\n"); v != want[0] {
		return fmt.Sprintf("%s is %q, the worker is built for %q", compiler, v, want[0])
	}
	if r := strings.TrimSpace(clang.stdout); r != want[1] {
		return fmt.Sprintf("%s's resource directory is %s, the worker's would be %s", compiler, r, want[1])
	}
	return ""
}

// Verdict is what Check said of one compiler, as a Pool keeps it.
type Verdict struct {
	Compiler string    `json:"compiler"`      // as the jobs name it
	File     string    `json:"file"`          // the file it resolved to
	Why      string    `json:"why,omitempty"` // "": the workers stand in for it
	At       time.Time `json:"checked"`
}

// verdicts keeps Check's verdict per compiler, for as long as the name
// resolves to the same file (device, inode, size, modification time): a
// compiler replaced on disk, or a name that now finds another one, is
// checked again. A check cut short by its context is not kept.
type verdicts struct {
	mu sync.Mutex
	m  map[string]*verdict // by the compiler's name and the file it resolved to
}

type verdict struct {
	mu   sync.Mutex
	id   string // the file's identity when checked
	done bool
	v    Verdict
}

// get returns the verdict on compiler (run from dir with env), calling
// check when none is kept for the file it resolves to now.
func (vs *verdicts) get(ctx context.Context, compiler, dir string, env []string, check func() string) string {
	file, id, err := Identify(compiler, dir, env)
	if err != nil {
		return check() // it cannot be run: the check says so
	}
	key := compiler + "\x00" + file
	vs.mu.Lock()
	if vs.m == nil {
		vs.m = map[string]*verdict{}
	}
	e := vs.m[key]
	if e == nil || e.id != id {
		e = &verdict{id: id, v: Verdict{Compiler: compiler, File: file}}
		vs.m[key] = e
	}
	vs.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		why := check()
		if ctx.Err() != nil {
			return why
		}
		e.done, e.v.Why, e.v.At = true, why, time.Now()
	}
	return e.v.Why
}

// list returns the verdicts kept, by compiler.
func (vs *verdicts) list() []Verdict {
	vs.mu.Lock()
	entries := make([]*verdict, 0, len(vs.m))
	for _, e := range vs.m {
		entries = append(entries, e)
	}
	vs.mu.Unlock()
	var out []Verdict
	for _, e := range entries {
		e.mu.Lock()
		if e.done {
			out = append(out, e.v)
		}
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Compiler+out[i].File < out[j].Compiler+out[j].File })
	return out
}

// Identify resolves a job's compiler as the job's exec would (a name
// without a slash in the PATH of the job's env, a relative path from its
// dir), then its symbolic links, and returns the file and its identity
// (device, inode, size, modification time): a compiler replaced on disk,
// or a name retargeted to another file, has another.
func Identify(compiler, dir string, env []string) (file, id string, err error) {
	path, err := lookPath(compiler, dir, env)
	if err != nil {
		return "", "", err
	}
	if file, err = filepath.EvalSymlinks(path); err != nil {
		return "", "", err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		return "", "", err
	}
	return file, fmt.Sprintf("%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec), nil
}

// lookPath finds compiler as the job's own exec would: a name without a
// slash in env's PATH (not thindist's: a server serves links with other
// environments), a relative path from dir.
func lookPath(compiler, dir string, env []string) (string, error) {
	if strings.Contains(compiler, "/") {
		if !filepath.IsAbs(compiler) {
			compiler = filepath.Join(dir, compiler)
		}
		return compiler, nil
	}
	search := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, d := range filepath.SplitList(search) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, compiler)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the job's PATH", compiler)
}
