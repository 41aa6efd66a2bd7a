package workerserver

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// compileJob writes a C file in a temporary directory and returns it with
// the clang command line that compiles it to out.
func compileJob(t *testing.T, src, out string) (dir string, argv []string) {
	t.Helper()
	bin := testprog.LLVMBin()
	testprog.NeedLLVM(t, bin, "clang")
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, []string{filepath.Join(bin, "clang"), "-c", "-O2", "a.c", "-o", out}
}

// TestLinkRunsJobsOnALentWorker: a link's jobs run on the worker the
// server lends it, not through the server; the worker goes back to the
// server when the link ends, with its jobs counted, and serves the next
// link without a new worker being started.
func TestLinkRunsJobsOnALentWorker(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	work, argv := compileJob(t, "int a(int x) { return x * 3; }\n", "a.o")
	for link := 1; link <= 2; link++ {
		cl := client(t, dir)
		for i := 0; i < 3; i++ {
			os.Remove(filepath.Join(work, "a.o"))
			o, err := cl.Run(context.Background(), work, argv, os.Environ())
			if err != nil || o.Elsewhere != "" || o.Rerun != "" || o.Status != 0 {
				t.Fatalf("link %d, job %d: %+v, %v", link, i, o, err)
			}
			if fi, err := os.Stat(filepath.Join(work, "a.o")); err != nil || fi.Size() == 0 {
				t.Fatalf("link %d, job %d made no object: %v", link, i, err)
			}
			if want := link == 1 && i == 0; o.Started != want {
				t.Errorf("link %d, job %d: started a worker %v, want %v", link, i, o.Started, want)
			}
		}
		st := waitFor(t, dir, func(*Status) bool { return true })
		if st.Workers.Busy != 1 || st.Workers.Jobs != 3*(link-1) {
			t.Errorf("link %d, lent its worker: %+v, want 1 busy and the jobs of the links before (%d) counted", link, st.Workers, 3*(link-1))
		}
		cl.Close()
		st = waitFor(t, dir, func(st *Status) bool { return st.Workers.Busy == 0 })
		if st.Workers.Idle != 1 || st.Workers.Started != 1 || st.Workers.Jobs != 3*link {
			t.Errorf("after link %d: %+v, want the one worker idle, %d jobs counted", link, st.Workers, 3*link)
		}
	}
}

// TestLentWorkerOfAVanishedLinkIsKilled: a link that ends without giving
// its lent worker back (it died, or broke off mid-job) leaves a worker
// that may be mid-message: the server kills it rather than lend it again.
// So does one that sends anything but the return.
func TestLentWorkerOfAVanishedLinkIsKilled(t *testing.T) {
	dir := serve(t, filepath.Join(t.TempDir(), "server"))
	work, argv := compileJob(t, "int b(void) { return 2; }\n", "b.o")
	for _, ending := range []string{"closes", "sends another lease"} {
		cl := client(t, dir)
		cc, err := cl.get()
		if err != nil {
			t.Fatal(err)
		}
		if why := cl.lease(cc, work, argv, os.Environ()); why != "" {
			t.Fatalf("no worker lent: %s", why)
		}
		waitFor(t, dir, func(st *Status) bool { return st.Workers.Busy == 1 })
		pid := cc.loan.PID()
		if ending == "sends another lease" {
			worker.WriteMessage(cc.c, appendCommand([]string{"lease"}, work, argv, os.Environ()))
			bufio.NewReader(cc.c).ReadByte() // the server ends the connection
		}
		cc.loan.Close()
		cc.end()
		st := waitFor(t, dir, func(st *Status) bool { return st.Workers.Busy == 0 })
		if st.Workers.Idle != 0 {
			t.Errorf("a link that %s: its lent worker is idle again (%+v), not killed", ending, st.Workers)
		}
		for deadline := time.Now().Add(time.Minute); !Gone(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("a link that %s: its lent worker (pid %d) still runs", ending, pid)
			}
		}
	}
}
