package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// backends compiles sources (name → C text) with -flto=thin, runs the thin
// link with --thinlto-index-only, and returns each module's backend
// command, its object written to NAME.native.o. The compiles warn about
// stack frames larger than 100 bytes, which the backends check.
func backends(t *testing.T, sources map[string]string) (dir string, cmds map[string][]string) {
	t.Helper()
	bin := testprog.LLVMBin()
	testprog.NeedLLVM(t, bin, "clang", "ld.lld")
	clang := filepath.Join(bin, "clang")
	dir = t.TempDir()
	var objs []string
	for name, text := range sources {
		if err := os.WriteFile(filepath.Join(dir, name+".c"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, dir, clang, "-flto=thin", "-O2", "-Wframe-larger-than=100", "-c", name+".c", "-o", name+".o")
		objs = append(objs, name+".o")
	}
	run(t, dir, append([]string{clang, "-flto=thin", "-fuse-ld=lld", "-Wl,--thinlto-index-only", "-o", "prog"}, objs...)...)
	cmds = map[string][]string{}
	for name := range sources {
		cmds[name] = []string{clang, "-c", "-O2", "-x", "ir", name + ".o", "-fthinlto-index=" + name + ".o.thinlto.bc", "-o", name + ".native.o"}
	}
	return dir, cmds
}

func run(t *testing.T, dir string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

const (
	bigFrame = "int big(int i) { volatile char b[4096]; b[i] = 1; return b[i ^ 1]; }\n" +
		"void bad(void);\nint main(int c, char **v) { bad(); return big(c); }\n"
	badAsm = "__attribute__((noinline)) void bad(void) { __asm__ volatile(\"notaninstruction\"); }\n"
)

// TestDiagnostics: a backend warning and a backend error print exactly
// what exec'd clang prints, with its exit status, the worker surviving both.
func TestDiagnostics(t *testing.T) {
	path := testprog.Worker(t)
	dir, cmds := backends(t, map[string]string{"a": bigFrame, "b": badAsm})
	r := NewRunner(proc.Exec{}, proc.Exec{}, Options{Path: path})
	defer r.Close()
	for _, c := range []struct {
		argv   []string
		status int
		print  string
	}{
		{cmds["a"], 0, "warning: <unknown>:0:0: stack frame size ("},
		{cmds["b"], 1, "error: invalid instruction mnemonic 'notaninstruction'"},
	} {
		var res [2]*proc.Result
		for i, x := range []proc.Runner{proc.Exec{}, r} {
			var err error
			if res[i], err = x.Run(context.Background(), &proc.Cmd{Argv: c.argv, Dir: dir, Env: os.Environ()}); err != nil {
				t.Fatal(err)
			}
		}
		if res[1].By != proc.ByWorker {
			t.Errorf("%s: not run by the worker: %s", c.argv, res[1].NotWorker)
		}
		if res[0].ExitCode != c.status || !strings.Contains(string(res[0].Stderr), c.print) {
			t.Fatalf("exec'd clang: %s, %q; want exit status %d and %q", res[0].Status(), res[0].Stderr, c.status, c.print)
		}
		if res[1].ExitCode != res[0].ExitCode || string(res[1].Stderr) != string(res[0].Stderr) {
			t.Errorf("worker: %s, %q; exec'd clang: %s, %q", res[1].Status(), res[1].Stderr, res[0].Status(), res[0].Stderr)
		}
	}
	if st := r.Stats(); st.Started != 1 || st.Jobs != 2 {
		t.Errorf("stats %+v: want one worker for both jobs", st)
	}
}

// TestClang19: a compiler other than the worker's build goes to the next
// runner, and the result says why.
func TestClang19(t *testing.T) {
	path := testprog.Worker(t)
	clang19 := "/usr/lib/llvm-19/bin/clang"
	testprog.NeedLLVM(t, filepath.Dir(clang19), "clang")
	dir, cmds := backends(t, map[string]string{"a": bigFrame, "b": badAsm})
	r := NewRunner(proc.Exec{}, proc.Exec{}, Options{Path: path})
	defer r.Close()
	argv := append([]string{clang19}, cmds["a"][1:]...)
	res, err := r.Run(context.Background(), &proc.Cmd{Argv: argv, Dir: dir, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if res.By == proc.ByWorker || !strings.Contains(res.NotWorker, "clang version 19") {
		t.Errorf("clang 19's job: by %v, why not: %q", res.By, res.NotWorker)
	}
	if st := r.Stats(); st.Started != 0 || st.Others != 1 {
		t.Errorf("stats %+v: want no worker started", st)
	}
}

// TestRerun: a worker killed, hung past its time bound or grown past its
// memory bound mid-job is replaced, and its job rerun by exec writes the
// object exec'd clang writes. A job to kill or hang stalls on its index, a
// FIFO, until its worker is gone.
func TestRerun(t *testing.T) {
	path := testprog.Worker(t)
	for _, c := range []struct {
		name        string
		opts        Options
		stall, kill bool
		why         string
	}{
		{"killed", Options{}, true, true, "the worker ended mid-job (signal: killed)"},
		{"hung", Options{Timeout: time.Second}, true, false, "time bound"},
		// Any worker is above 1 byte as soon as it starts the job.
		{"grown", Options{MemLimit: 1}, false, false, "memory bound"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Path = path
			dir, cmds := backends(t, map[string]string{"a": bigFrame, "b": badAsm})
			argv := cmds["a"]
			if _, err := (proc.Exec{}).Run(context.Background(), &proc.Cmd{Argv: argv, Dir: dir}); err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(filepath.Join(dir, "a.native.o"))
			os.Remove(filepath.Join(dir, "a.native.o"))
			r := NewRunner(proc.Exec{}, proc.Exec{}, c.opts)
			defer r.Close()
			index, _ := os.ReadFile(filepath.Join(dir, "a.o.thinlto.bc"))
			if c.stall {
				stall(t, filepath.Join(dir, "a.o.thinlto.bc"), path, c.kill)
			}
			res, err := r.Run(context.Background(), &proc.Cmd{Argv: argv, Dir: dir, Env: os.Environ()})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "a.native.o"))
			if res.By != proc.ByExec || res.Failed() || !strings.Contains(res.NotWorker, c.why) || string(got) != string(want) || len(want) == 0 {
				t.Errorf("%s, by %v, why not %q, object of %d bytes (want %d); want a rerun by exec because %q",
					res.Status(), res.By, res.NotWorker, len(got), len(want), c.why)
			}
			// The next job gets a new worker (killed again, when any is over
			// the memory bound). Not after the time bound: under load, a
			// new worker's job could itself run past one second.
			if c.opts.Timeout != 0 {
				return
			}
			os.Remove(filepath.Join(dir, "a.native.o"))
			restore(t, filepath.Join(dir, "a.o.thinlto.bc"), index)
			res, err = r.Run(context.Background(), &proc.Cmd{Argv: argv, Dir: dir, Env: os.Environ()})
			reruns := 1
			if c.stall {
				if err != nil || res.By != proc.ByWorker {
					t.Errorf("the next job: %+v %v; want it on a new worker", res, err)
				}
			} else {
				reruns = 2
			}
			if st := r.Stats(); st.Reruns != reruns || st.Started != 2 {
				t.Errorf("stats %+v: want %d reruns, 2 workers started", st, reruns)
			}
		})
	}
}

// stall replaces file with a FIFO that a worker (the first to open it)
// reads nothing from, until it is gone (killed here, when kill is set);
// the next reader then reads file's bytes.
func stall(t *testing.T, file, worker string, kill bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(file)
	if err := syscall.Mkfifo(file, 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		first, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer first.Close()
		pid := serving(worker)
		if pid == 0 {
			t.Error("no worker process has the FIFO open")
			return
		}
		if kill {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		next, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		next.Write(data)
		next.Close()
	}()
}

// restore puts file back as a regular file holding data.
func restore(t *testing.T, file string, data []byte) {
	os.Remove(file)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// serving returns the pid of this process's child running worker --serve.
func serving(worker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])) // -1+1: all of it
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && string(cmdline) == worker+"\x00--serve\x00" {
			return pid
		}
	}
	return 0
}
