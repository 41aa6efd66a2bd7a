package bitcode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var llvmBin = testprog.LLVMBin()

// distributorEnv makes the test binary act as a ThinLTO distributor: it
// saves each job's index shard as $dir/<job>.thinlto.bc (plus the job's
// input module name in <job>.module), then runs the job.
const distributorEnv = "BITCODE_TEST_SHARD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(distributorEnv); dir != "" {
		if err := distribute(dir, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "test distributor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func distribute(dir, jobFile string) error {
	raw, err := os.ReadFile(jobFile)
	if err != nil {
		return err
	}
	var spec struct {
		Common struct {
			Args []string `json:"args"`
		} `json:"common"`
		Jobs []struct {
			Args   []string `json:"args"`
			Inputs []string `json:"inputs"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	for i, job := range spec.Jobs {
		for _, a := range job.Args {
			shard, ok := strings.CutPrefix(a, "-fthinlto-index=")
			if !ok {
				continue
			}
			b, err := os.ReadFile(shard)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.thinlto.bc", i)), b, 0o644); err != nil {
				return err
			}
		}
		if len(job.Inputs) > 0 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.module", i)), []byte(job.Inputs[0]), 0o644); err != nil {
				return err
			}
		}
		args := append(append([]string(nil), spec.Common.Args...), job.Args...)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("job %d: %v", i, err)
		}
	}
	return nil
}

var sources = map[string]string{
	"t1.c":   "static int helper1(int x){ return x*3+1; }\nint f1(int x){ return helper1(x) + 2; }\n",
	"t2.c":   "int g2 = 5;\nint f2(int x){ return x*g2 - 7; }\n",
	"t3.c":   "int f1(int);\nint f3(int x){ return f1(x) ^ 0x55; }\n",
	"main.c": "int f1(int); int f2(int); int f3(int);\nint main(int argc, char **argv){ return f1(argc)+f2(argc)+f3(argc); }\n",
}

type project struct {
	t   *testing.T
	dir string
}

func newProject(t *testing.T) *project {
	t.Helper()
	testprog.NeedLLVM(t, llvmBin, "clang", "llvm-bcanalyzer")
	p := &project{t: t, dir: t.TempDir()}
	for name, src := range sources {
		p.write(name, src)
	}
	p.build()
	return p
}

func (p *project) write(name, src string) {
	if err := os.WriteFile(filepath.Join(p.dir, name), []byte(src), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *project) run(env []string, name string, args ...string) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(llvmBin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// build compiles the sources and puts t1-t3 into a static archive.
func (p *project) build() {
	for _, f := range []string{"t1", "t2", "t3", "main"} {
		p.run(nil, "clang", "-O2", "-flto=thin", "-c", f+".c", "-o", f+".o")
	}
	os.Remove(filepath.Join(p.dir, "libt.a"))
	p.run(nil, "llvm-ar", "rcs", "libt.a", "t1.o", "t2.o", "t3.o")
}

// link links with the test distributor and returns the shards keyed by the
// job's input module with the archive member's PID part removed.
func (p *project) link(tag string) map[string][]byte {
	p.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		p.t.Fatal(err)
	}
	shardDir := filepath.Join(p.dir, "shards-"+tag)
	if err := os.Mkdir(shardDir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	p.run([]string{distributorEnv + "=" + shardDir}, "clang", "-O2", "-flto=thin", "-fuse-ld=lld",
		"main.o", "libt.a", "-fthinlto-distributor="+exe, "-o", "a-"+tag)
	files, _ := filepath.Glob(filepath.Join(shardDir, "*.thinlto.bc"))
	if len(files) != 4 {
		p.t.Fatalf("got %d shards, want 4", len(files))
	}
	shards := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			p.t.Fatal(err)
		}
		mod, err := os.ReadFile(strings.TrimSuffix(f, ".thinlto.bc") + ".module")
		if err != nil {
			p.t.Fatal(err)
		}
		shards[stripPID(string(mod))] = b
	}
	return shards
}

// lld names archive members "lib.a(m.o at OFF).TASK.PIDHEX.o".
var pidRE = regexp.MustCompile(`^(.*\(.* at \d+\)\.\d+)\.[0-9A-F]+\.o$`)

func stripPID(path string) string {
	if m := pidRE.FindStringSubmatch(path); m != nil {
		return m[1] + ".o"
	}
	return path
}

func importsFrom(t *testing.T, shard []byte, member string) bool {
	t.Helper()
	mods, err := ModuleTable(shard)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if strings.Contains(m.Path, "("+member+" at ") {
			return true
		}
	}
	return false
}

func TestRealShardsAcrossLinks(t *testing.T) {
	p := newProject(t)
	run1, run2 := p.link("1"), p.link("2")
	if len(run1) != 4 || len(run2) != 4 {
		t.Fatalf("shard keys: %d, %d", len(run1), len(run2))
	}
	rawDiffer := 0
	for mod, a := range run1 {
		b, ok := run2[mod]
		if !ok {
			t.Fatalf("second link has no shard for %s", mod)
		}
		mods, err := ModuleTable(a)
		if err != nil {
			t.Fatal(err)
		}
		hasMember := false
		for _, m := range mods {
			hasMember = hasMember || strings.Contains(m.Path, "(")
			if !m.HasHash() {
				t.Errorf("%s: module %q has no hash", mod, m.Path)
			}
		}
		if hasMember {
			if string(a) == string(b) {
				t.Errorf("%s: raw shards equal across links; expected PID-bearing paths to differ", mod)
			}
			rawDiffer++
		}
		if mustDigest(t, a) != mustDigest(t, b) {
			t.Errorf("%s: NormalizedDigest differs across links", mod)
		}
	}
	if rawDiffer < 2 {
		t.Errorf("only %d shards name archive members", rawDiffer)
	}
	// Distinct jobs must not share a key.
	seen := map[[32]byte]string{}
	for mod, a := range run1 {
		d := mustDigest(t, a)
		if other, ok := seen[d]; ok {
			t.Errorf("shards of %s and %s have the same digest", mod, other)
		}
		seen[d] = mod
	}
}

func TestRealDigestFollowsImportedSource(t *testing.T) {
	p := newProject(t)
	before := p.link("before")
	p.write("t1.c", strings.Replace(sources["t1.c"], "x*3+1", "x*5+1", 1))
	p.build()
	after := p.link("after")

	importers := 0
	for mod, a := range before {
		b := after[mod]
		changed := mustDigest(t, a) != mustDigest(t, b)
		switch {
		case strings.Contains(mod, "(t1.o"), importsFrom(t, a, "t1.o"):
			importers++
			if !changed {
				t.Errorf("%s: digest unchanged after editing t1.c", mod)
			}
		default:
			if changed {
				t.Errorf("%s: digest changed though it does not import t1.o", mod)
			}
		}
	}
	if importers < 2 {
		t.Errorf("only %d shards involve t1.o; test setup does not exercise imports", importers)
	}
}

var (
	bcEntryRE = regexp.MustCompile(`<ENTRY [^>]*op0=(\d+) .*record string = '(.*)'`)
	bcHashRE  = regexp.MustCompile(`<HASH [^>]*op0=(\d+) op1=(\d+) op2=(\d+) op3=(\d+) op4=(\d+)/>`)
)

func TestRealModuleTableMatchesBcanalyzer(t *testing.T) {
	p := newProject(t)
	for mod, shard := range p.link("x") {
		path := filepath.Join(p.dir, "shard.bc")
		if err := os.WriteFile(path, shard, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(llvmBin, "llvm-bcanalyzer"), "-dump", path).CombinedOutput()
		if err != nil {
			t.Fatalf("llvm-bcanalyzer: %v\n%s", err, out)
		}
		var want []Module
		for _, line := range strings.Split(string(out), "\n") {
			if m := bcEntryRE.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseUint(m[1], 10, 64)
				want = append(want, Module{ID: id, Path: m[2]})
			} else if m := bcHashRE.FindStringSubmatch(line); m != nil {
				for i := range 5 {
					v, _ := strconv.ParseUint(m[i+1], 10, 32)
					want[len(want)-1].Hash[i] = uint32(v)
				}
			}
		}
		got, err := ModuleTable(shard)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %+v\nwant %+v", mod, got, want)
		}
		if mod != "main.o" && !strings.Contains(fmt.Sprint(got), "(") {
			t.Errorf("%s: no archive member in table %+v", mod, got)
		}
	}
}
