package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// command is a's command line writing its object to out.
func command(a *action.Action, out string) *proc.Cmd {
	argv := a.Argv(func(i int) string { return a.Inputs[i].Path }, func(int) string { return out })
	return &proc.Cmd{Argv: argv, Dir: a.Dir, Env: os.Environ()}
}

// compileBoth runs c with exec and with r, writing the object to .exec
// and .worker beside out, and fails t unless both print, exit and write
// the same. It returns the worker's result.
func compileBoth(t *testing.T, r proc.Runner, a *action.Action, extra ...string) *proc.Result {
	t.Helper()
	out := a.Abs(a.Outputs[0].Path)
	var res [2]*proc.Result
	var obj [2][]byte
	for i, x := range []proc.Runner{proc.Exec{}, r} {
		o := out + [...]string{".exec", ".worker"}[i]
		c := command(a, o)
		c.Argv = append(c.Argv, extra...)
		var err error
		if res[i], err = x.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		obj[i], _ = os.ReadFile(o)
	}
	if res[0].ExitCode != res[1].ExitCode || !bytes.Equal(res[0].Stderr, res[1].Stderr) || !bytes.Equal(res[0].Stdout, res[1].Stdout) {
		t.Errorf("%s: exec'd clang: %s, stderr %q; worker: %s, stderr %q", a.ID, res[0].Status(), res[0].Stderr, res[1].Status(), res[1].Stderr)
	}
	if !bytes.Equal(obj[0], obj[1]) {
		t.Errorf("%s: the worker's object (%d bytes) differs from exec'd clang's (%d bytes)", a.ID, len(obj[1]), len(obj[0]))
	}
	return res[1]
}

// TestByteIdentical: a generated C++ program's DTLTO backends (archive
// members included) compiled by one worker, one after another, are
// byte-identical to exec'd clang's, with and without -mllvm options, and
// with a path mapped. After a shape's first jobs the worker compiles
// without clang's driver (worker.cpp, Shape): those jobs are checked the
// same way.
func TestByteIdentical(t *testing.T) {
	path := testprog.Worker(t)
	actions := testprog.Actions(t, testprog.Options{Modules: 6, CXX: true, ArchiveModules: 2})
	r := NewRunner(proc.Exec{}, proc.Exec{}, Options{Path: path})
	defer r.Close()
	// Each module with an -mllvm option, then without: an option one job
	// set must not stay set for the next (the worker resets LLVM's).
	extras := [][]string{{"-mllvm", "-align-all-functions=6"}, nil, {"-g", "-ffile-prefix-map=" + actions[0].Dir + "=src"}}
	for _, extra := range extras {
		for _, a := range actions {
			if res := compileBoth(t, r, a, extra...); res.By != proc.ByWorker {
				t.Errorf("%s: not compiled by the worker: %s", a.ID, res.NotWorker)
			}
		}
	}
	if st := r.Stats(); st.Started != 1 || st.Jobs != len(extras)*len(actions) {
		t.Errorf("stats %+v: want 1 worker for %d jobs", st, len(extras)*len(actions))
	}
}

// TestWorkerFreesEachJob: a worker's peak RSS stays flat over many jobs
// (before the worker ignored the driver's -disable-free it grew by about
// 64 KiB a job here, 5 MiB over these 80).
func TestWorkerFreesEachJob(t *testing.T) {
	path := testprog.Worker(t)
	actions := testprog.Actions(t, testprog.Options{Modules: 6, CXX: true})
	r := NewRunner(proc.Exec{}, proc.Exec{}, Options{Path: path})
	defer r.Close()
	var after10 int64
	for i := 0; i < 90; i++ {
		a := actions[i%len(actions)]
		res, err := r.Run(context.Background(), command(a, a.Abs(a.Outputs[0].Path)))
		if err != nil || res.By != proc.ByWorker {
			t.Fatalf("%v %+v", err, res)
		}
		if i == 9 {
			after10 = res.MaxRSS
		}
		if i == 89 && res.MaxRSS > after10+2<<20 {
			t.Errorf("the worker's peak RSS grew from %d KiB after 10 jobs to %d KiB after 90", after10>>10, res.MaxRSS>>10)
		}
	}
}

// kernelFlags are the code-generation options Linux 6.12's x86-64 files
// are compiled with (its compile_commands.json, tinyconfig), as thindist
// link --compdb gives them to each backend.
var kernelFlags = []string{
	"-fno-builtin-wcslen", "-fmacro-prefix-map=./=", "-m64", "-fintegrated-as", "-fno-PIE",
	"-fno-stack-protector", "-fshort-wchar", "-funsigned-char", "-fno-common", "-fno-strict-aliasing",
	"-mno-sse", "-mno-mmx", "-mno-sse2", "-mno-3dnow", "-mno-avx", "-fcf-protection=branch",
	"-fno-jump-tables", "-falign-loops=1", "-mno-80387", "-mno-fp-ret-in-387", "-mstack-alignment=8",
	"-mskip-rax-setup", "-mtune=generic", "-mno-red-zone", "-mcmodel=kernel",
	"-fno-asynchronous-unwind-tables", "-fno-delete-null-pointer-checks", "-Os", "-fomit-frame-pointer",
	"-ftrivial-auto-var-init=zero", "-fno-stack-clash-protection", "-fvisibility=hidden",
	"-falign-functions=16", "-fstrict-flex-arrays=3", "-fno-strict-overflow", "-fno-stack-check",
	"-ffreestanding", "-fno-function-sections", "-fno-data-sections",
}

// TestKernelOptions: modules compiled with a kernel's options, and their
// backends given them again (as thindist link --compdb does), are compiled
// by the worker, byte-identical to exec'd clang's; and the kernel's
// options change the code (the test would not notice a worker ignoring
// them otherwise).
func TestKernelOptions(t *testing.T) {
	path := testprog.Worker(t)
	bin := testprog.LLVMBin()
	clang := filepath.Join(bin, "clang")
	p, err := testprog.Generate(t.TempDir(), testprog.Options{Modules: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Compile(ctx, clang, kernelFlags...); err != nil {
		t.Fatal(err)
	}
	actions, err := p.CaptureActions(ctx, clang, "prog")
	if err != nil {
		t.Fatal(err)
	}
	if u := untested(append([]string{clang}, kernelFlags...)); u != "a command that is not a ThinLTO backend (no -fthinlto-index=)" {
		t.Fatalf("the worker is not tested with %s", u)
	}
	r := NewRunner(proc.Exec{}, proc.Exec{}, Options{Path: path})
	defer r.Close()
	for _, a := range actions {
		if res := compileBoth(t, r, a, kernelFlags...); res.By != proc.ByWorker {
			t.Errorf("%s: not compiled by the worker: %s", a.ID, res.NotWorker)
		}
		out := a.Abs(a.Outputs[0].Path)
		plain := out + ".plain"
		if _, err := (proc.Exec{}).Run(ctx, command(a, plain)); err != nil {
			t.Fatal(err)
		}
		k, _ := os.ReadFile(out + ".worker")
		o, _ := os.ReadFile(plain)
		if len(o) == 0 || bytes.Equal(k, o) {
			t.Errorf("%s: the kernel's options did not change the object", a.ID)
		}
	}
}
