// The cache tests check thindist's action cache with real links: clang and
// lld 22 run thindist as their DTLTO distributor on generated programs, and
// a compiler wrapper (passed as lld's remote compiler) records every
// backend it runs, so each test knows exactly which jobs compiled and which
// were served from the cache. Each rig has a cache directory of its own.

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// rig is one generated, compiled program with its own cache directory, a
// compiler wrapper that logs every backend it runs, and a distributor
// wrapper that keeps a copy of every job file lld writes.
type rig struct {
	t        *testing.T
	p        *testprog.Program
	tools    string // wrappers and logs
	cacheDir string
	wrapper  string // the compiler wrapper, lld's --thinlto-remote-compiler
	log      string // one line per backend the wrapper ran: its index shard
	dist     string // the distributor wrapper (copies the job file, runs thindist)
	jobs     string // where dist keeps the job files
	mu       sync.Mutex
	seen     map[string]bool // job files already returned
}

func newRig(t *testing.T, o testprog.Options) *rig {
	t.Helper()
	needClang(t)
	root := t.TempDir()
	p, err := testprog.Generate(filepath.Join(root, "prog"), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Compile(context.Background(), clang); err != nil {
		t.Fatal(err)
	}
	return rigFor(t, p, root)
}

// rigFor sets up the wrappers and the cache for a program already built,
// keeping them under root.
func rigFor(t *testing.T, p *testprog.Program, root string) *rig {
	t.Helper()
	r := &rig{
		t: t, p: p,
		tools:    filepath.Join(root, "tools"),
		cacheDir: filepath.Join(root, "cache"),
		jobs:     filepath.Join(root, "jobs"),
		seen:     map[string]bool{},
	}
	for _, d := range []string{r.tools, r.jobs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.log = filepath.Join(r.tools, "backends.log")
	r.wrapper = r.writeWrapper("cc-wrapper", "")
	r.dist = filepath.Join(r.tools, "dist")
	writeScript(t, r.dist, fmt.Sprintf(`#!/bin/sh
last=""
for a in "$@"; do last=$a; done
cp "$last" %s/ || exit 99
exec %s "$@"
`, shq(r.jobs), shq(thindist)))
	return r
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeScript(t *testing.T, path, text string) {
	t.Helper()
	// Write under another name and rename, so that a script being replaced
	// is never seen half written ("text file busy" cannot happen either).
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeWrapper (re)writes the compiler wrapper name in the tools directory;
// extra is a comment that changes its content (a "new compiler").
func (r *rig) writeWrapper(name, extra string) string {
	path := filepath.Join(r.tools, name)
	writeScript(r.t, path, fmt.Sprintf(`#!/bin/sh
# thindist cache test compiler wrapper %s
for a in "$@"; do
  case "$a" in -fthinlto-index=*) printf '%%s\n' "${a#-fthinlto-index=}" >> %s;; esac
done
exec %s "$@"
`, extra, shq(r.log), shq(clang)))
	return path
}

// link is one link of the rig's program.
type link struct {
	out      string   // -o, relative to the program's directory; default "prog"
	objs     []string // default: the program's link line
	flags    []string // more clang driver flags
	distArgs []string // more thindist flags
	compiler string   // --thinlto-remote-compiler; default the rig's wrapper
	prefix   []string // run the driver under this command (e.g. unshare)
	cacheDir string   // default the rig's
}

// result is what one link did.
type result struct {
	out      string   // absolute path of the program
	stderr   string   // the driver's output, thindist's summary included
	jobs     []rigJob // from lld's job file
	compiled []string // the modules (see modID) whose backends ran
}

// rigJob is one backend job of lld's job file.
type rigJob struct {
	module string   // modID of inputs[0]
	shard  string   // inputs[1] as spelled
	uses   []string // modID of inputs[0] and of every import
}

// memberRE matches the PID-bearing suffix lld gives archive members it
// copies out: "lib.a(m.o at 88).<seq>.<HEXPID>.o".
var memberRE = regexp.MustCompile(`\)\.[0-9]+\.[0-9A-Fa-f]+\.o$`)

// modID names a module the same way in every link: archive members without
// the PID-bearing suffix lld adds.
func modID(p string) string {
	if loc := memberRE.FindStringIndex(p); loc != nil {
		return p[:loc[0]+1]
	}
	return p
}

func (r *rig) linkCmd(l link) *exec.Cmd {
	if l.out == "" {
		l.out = "prog"
	}
	if l.objs == nil {
		l.objs = r.p.Objects
	}
	if l.compiler == "" {
		l.compiler = r.wrapper
	}
	if l.cacheDir == "" {
		l.cacheDir = r.cacheDir
	}
	// clang passes --thinlto-remote-compiler=<itself> to lld; the -Wl
	// option comes later on lld's command line and wins (checked with
	// clang/lld 22: common.args[0] is the wrapper).
	args := []string{"-flto=thin", "-fuse-ld=lld", "-O2",
		"-fthinlto-distributor=" + r.dist,
		"-Wl,--thinlto-remote-compiler=" + l.compiler,
		"-Xthinlto-distributor=--cache-dir=" + l.cacheDir,
		"-Xthinlto-distributor=--progress=never",
	}
	for _, a := range l.distArgs {
		args = append(args, "-Xthinlto-distributor="+a)
	}
	args = append(args, l.flags...)
	args = append(args, l.objs...)
	args = append(args, "-o", l.out)
	argv := append(append([]string{}, l.prefix...), clang)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.p.Dir
	// The user's own settings must not leak into the tests.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "THINDIST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// link links the program and returns what happened; the link must succeed.
// Links of one rig must not run concurrently (the wrapper log is shared);
// see linkQuiet for concurrent ones.
func (r *rig) link(l link) *result {
	r.t.Helper()
	if err := os.WriteFile(r.log, nil, 0o644); err != nil {
		r.t.Fatal(err)
	}
	res := r.linkQuiet(l)
	res.jobs = r.jobFile(res.out)
	byShard := map[string]rigJob{}
	for _, j := range res.jobs {
		byShard[j.shard] = j
	}
	data, err := os.ReadFile(r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		j, ok := byShard[line]
		if !ok {
			r.t.Fatalf("the compiler ran with index shard %q, which is no job of the job file", line)
		}
		res.compiled = append(res.compiled, j.module)
	}
	sort.Strings(res.compiled)
	return res
}

// linkQuiet links without looking at the wrapper log.
func (r *rig) linkQuiet(l link) *result {
	r.t.Helper()
	cmd := r.linkCmd(l)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("link %q failed: %v\n%s", cmd.Args, err, out.String())
	}
	o := l.out
	if o == "" {
		o = "prog"
	}
	return &result{out: filepath.Join(r.p.Dir, o), stderr: out.String()}
}

// jobFile reads the one job file of the link to out that has not been read
// yet.
func (r *rig) jobFile(out string) []rigJob {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	base := filepath.Base(out)
	stem := strings.TrimSuffix(base, filepath.Ext(base)) // lld's "<stem of -o>.<PID>.dist-file.json"
	matches, _ := filepath.Glob(filepath.Join(r.jobs, stem+".*.dist-file.json"))
	var fresh []string
	for _, m := range matches {
		if !r.seen[m] {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) != 1 {
		r.t.Fatalf("want one new job file for %s, found %q", out, fresh)
	}
	r.seen[fresh[0]] = true
	data, err := os.ReadFile(fresh[0])
	if err != nil {
		r.t.Fatal(err)
	}
	var jf struct {
		Jobs []struct {
			Inputs []string `json:"inputs"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &jf); err != nil {
		r.t.Fatal(err)
	}
	var jobs []rigJob
	for _, j := range jf.Jobs {
		if len(j.Inputs) < 2 {
			r.t.Fatalf("job with inputs %q", j.Inputs)
		}
		jb := rigJob{module: modID(j.Inputs[0]), shard: j.Inputs[1]}
		jb.uses = append(jb.uses, jb.module)
		for _, in := range j.Inputs[2:] {
			jb.uses = append(jb.uses, modID(in))
		}
		jobs = append(jobs, jb)
	}
	return jobs
}

// skipJobFiles marks every job file kept so far as read (after links whose
// job files are not looked at).
func (r *rig) skipJobFiles() {
	r.mu.Lock()
	defer r.mu.Unlock()
	matches, _ := filepath.Glob(filepath.Join(r.jobs, "*.dist-file.json"))
	for _, m := range matches {
		r.seen[m] = true
	}
}

// modules lists the jobs' modules, sorted.
func (res *result) modules() []string {
	var m []string
	for _, j := range res.jobs {
		m = append(m, j.module)
	}
	sort.Strings(m)
	return m
}

// summary is thindist's summary line, parsed.
type summary struct{ jobs, failed, cached, remote, local int }

var summaryRE = regexp.MustCompile(`thindist: (?:.*?: )?(\d+) jobs, (\d+) failed, (\d+) cached, (\d+) remote, (\d+) local`)

func (res *result) summary(t *testing.T) summary {
	t.Helper()
	m := summaryRE.FindStringSubmatch(res.stderr)
	if m == nil {
		t.Fatalf("no summary line in:\n%s", res.stderr)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return summary{n(1), n(2), n(3), n(4), n(5)}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keep copies the linked program aside (the next link overwrites it).
func keep(t *testing.T, res *result, name string) []byte {
	t.Helper()
	b := readFile(t, res.out)
	if err := os.WriteFile(filepath.Join(filepath.Dir(res.out), name), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

func sameBinary(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the binary differs from the reference (%d bytes vs %d)", what, len(got), len(want))
	}
}

func equalSets(a, b []string) bool {
	a, b = append([]string{}, a...), append([]string{}, b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// cacheFiles lists the entries of a cache directory: path (relative) ->
// size, for cas/ and ac/.
func cacheFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	for _, sub := range []string{"cas", "ac"} {
		filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			files[rel] = fi.Size()
			return nil
		})
	}
	return files
}

// checkCacheIntact verifies every entry of a cache directory: each blob's
// content matches its name, each record its checksum, and no temporary
// file is left behind.
func checkCacheIntact(t *testing.T, dir string) {
	t.Helper()
	for rel := range cacheFiles(t, dir) {
		data := readFile(t, filepath.Join(dir, rel))
		switch {
		case strings.HasPrefix(rel, "cas/"):
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != filepath.Base(rel) {
				t.Errorf("cache blob %s does not match its digest", rel)
			}
		case strings.HasPrefix(rel, "ac/"):
			if len(data) < 32 || sha256.Sum256(data[32:]) != [32]byte(data[:32]) {
				t.Errorf("cache record %s is damaged", rel)
			}
		}
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmps) > 0 {
		t.Errorf("temporary files left in the cache: %d", len(tmps))
	}
}

// stats runs `thindist cache stats` and returns its fields.
func cacheStats(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, err := exec.Command(thindist, "cache", "stats", "--cache-dir="+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("thindist cache stats: %v\n%s", err, out)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// statInt reads the leading integer of a stats field ("12 (50.0%)").
func statInt(t *testing.T, m map[string]string, key string) int {
	t.Helper()
	f := strings.Fields(m[key])
	if len(f) == 0 {
		t.Fatalf("cache stats has no %q: %v", key, m)
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("cache stats %q = %q", key, m[key])
	}
	return v
}
