package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/thindist/thindist/internal/testsupport/realproj"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

//go:embed serial_dist.py
var serialDist []byte

//go:embed testdata/noopcc.c
var noopSource []byte

//go:embed testdata/timewrap.c
var timewrapSource []byte

// tools are the programs a benchmark run uses.
type tools struct {
	tc       realproj.Toolchain
	thindist string // built from this checkout
	front    string // thindist-link, built beside it
	python   string
	serial   string // serial_dist.py
	noopcc   string // the no-op compiler
	timewrap string // times the distributor process (testdata/timewrap.c)
	// worker is thindist-worker (worker/), kept apart from thindist so that
	// only the "thindist, worker" method uses it.
	worker string
}

func setupTools(ctx context.Context, o *options) (*tools, error) {
	bin := filepath.Join(o.work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	t := &tools{
		tc:       realproj.DefaultToolchain(),
		thindist: filepath.Join(bin, "thindist"),
		front:    filepath.Join(bin, "thindist-link"),
		python:   o.python,
		serial:   filepath.Join(bin, "serial_dist.py"),
		noopcc:   filepath.Join(bin, "noopcc"),
		timewrap: filepath.Join(bin, "timewrap"),
		worker:   filepath.Join(bin, "worker", "thindist-worker"),
	}
	// The worker's sources are in the module's worker/, wherever bench
	// runs from (go run ./bench, or its tests in bench/).
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the module's root: %v", err)
	}
	workerDir := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "worker")
	if out, err := exec.CommandContext(ctx, "make", "-s", "-C", workerDir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the worker in %s: %v\n%s", workerDir, err, out)
	}
	if err := os.MkdirAll(filepath.Dir(t.worker), 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "cp", filepath.Join(workerDir, "thindist-worker"), t.worker).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying the worker: %v\n%s", err, out)
	}
	if _, err := testprog.BuildThindist(bin); err != nil { // and thindist-link beside it
		return nil, err
	}
	if err := os.WriteFile(t.serial, serialDist, 0o755); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name, exe string
		src       []byte
	}{{"noopcc.c", t.noopcc, noopSource}, {"timewrap.c", t.timewrap, timewrapSource}} {
		src := filepath.Join(bin, c.name)
		if err := os.WriteFile(src, c.src, 0o644); err != nil {
			return nil, err
		}
		if out, err := exec.CommandContext(ctx, t.tc.Clang, "-O2", src, "-o", c.exe).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v\n%s", c.name, err, out)
		}
	}
	return t, nil
}

// describeMachine names what the figures depend on.
func describeMachine(t *tools) []string {
	first := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Join(strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:], " ")
	}
	// The checkout the figures come from; RESULTS.md itself being rewritten
	// does not make it dirty.
	commit := first("git", "describe", "--always")
	if out, err := exec.Command("git", "status", "--porcelain", "--", ".", ":!bench/RESULTS.md").Output(); err == nil && len(out) > 0 {
		commit += "-dirty"
	}
	return []string{
		fmt.Sprintf("nproc: %s", first("nproc")),
		fmt.Sprintf("CPU: %s", cpu),
		fmt.Sprintf("memory: %s", mem),
		fmt.Sprintf("kernel: %s", kernel),
		fmt.Sprintf("clang: %s", first(t.tc.Clang, "--version")),
		fmt.Sprintf("lld: %s", first(filepath.Join(filepath.Dir(t.tc.Clang), "ld.lld"), "--version")),
		fmt.Sprintf("python: %s", first(t.python, "--version")),
		fmt.Sprintf("go: %s", first("go", "env", "GOVERSION")),
		fmt.Sprintf("thindist: %s", commit),
	}
}

// describeFS names the file system dir is on, from /proc/self/mountinfo:
// its type and device. The builds, lld's outputs and thindist's live
// there, and creating a file costs very different CPU on different file
// systems (on ext4 without a journal, a scan of recently deleted inodes).
func describeFS(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "?"
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "?"
	}
	best, desc := -1, "?"
	for _, line := range strings.Split(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		mp := f[4]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			best, desc = len(mp), fmt.Sprintf("%s on %s (%s, mounted on %s)", abs, f[sep+1], f[sep+2], mp)
			if f[sep+1] == "ext4" && !ext4Journaled(f[sep+2]) {
				desc += ", " + noJournal
			}
		}
	}
	return desc
}

// noJournal marks a work directory on ext4 without a journal: there each
// new inode skips the inodes deleted in the last minutes (the kernel's
// recently_deleted), and back-to-back links delete and create thousands of
// files, so a file a backend creates costs tens to hundreds of times what
// it costs on a journaled ext4, tmpfs or XFS, where users' builds are.
const noJournal = "WITHOUT A JOURNAL: creating files costs far more than users pay; give -work a directory on a journaled file system"

// ext4Journaled says whether the ext4 file system on the block device
// source (/dev/vda) has a journal: jbd2 lists a journaled one in
// /proc/fs/jbd2 as NAME-INODE. It reports true when it cannot tell.
func ext4Journaled(source string) bool {
	name := filepath.Base(source)
	if _, err := os.Stat(filepath.Join("/sys/fs/ext4", name)); err != nil {
		return true
	}
	m, _ := filepath.Glob(filepath.Join("/proc/fs/jbd2", name+"-*"))
	return len(m) > 0
}
