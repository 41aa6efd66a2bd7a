package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// anonKiB is process pid's resident anonymous memory (RssAnon of
// /proc/PID/status), in KiB.
func anonKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	t.Fatal("no RssAnon")
	return 0
}

// TestIdleWorkerTrimsHeap: a worker that has compiled a large module and
// has no next job holds about as much anonymous memory as a fresh one:
// what the job freed goes back to the system (before, glibc's arenas kept
// tens of MiB of it here).
func TestIdleWorkerTrimsHeap(t *testing.T) {
	path := testprog.Worker(t)
	dir := t.TempDir()
	var src strings.Builder
	for i := 0; i < 800; i++ {
		fmt.Fprintf(&src, "int f%d(int *p, int n) { int s = %d; for (int i = 0; i < n; i++) s += p[i] * %d ^ (s >> 3); return s; }\n", i, i, i%7+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := start(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	time.Sleep(200 * time.Millisecond) // started, idle
	fresh := anonKiB(t, w.p.Pid())
	clang := filepath.Join(testprog.LLVMBin(), "clang")
	a, err := w.do(dir, []string{clang, "-O2", "-c", "big.c", "-o", "big.o"}, os.Environ())
	if err != nil || a.declined != "" || a.status != 0 {
		t.Fatalf("the job: %v %+v", err, a)
	}
	time.Sleep(500 * time.Millisecond) // idle again
	idle := anonKiB(t, w.p.Pid())
	if idle > fresh+4<<10 {
		t.Errorf("the idle worker holds %d KiB of anonymous memory after a job of %d KiB peak RSS, a fresh one %d KiB",
			idle, a.maxRSS>>10, fresh)
	}
}
