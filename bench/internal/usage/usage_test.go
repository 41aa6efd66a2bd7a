package usage

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestTreeAndSampler: a shell whose child touches 64 MiB, spins a little
// and says so: the child's CPU and faults show in the shell's Tree, and
// both Samplers see its memory while it waits for its input to end (the
// RSS one without a PSS).
func TestTreeAndSampler(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sh", "-c", `python3 -c '
import sys, time
b = bytearray(64 << 20)
for i in range(0, len(b), 4096): b[i] = 1
t = time.process_time()
while time.process_time() - t < 0.2: pass
print("ready", flush=True)
sys.stdin.read()
'; true`) // the shell forks: python is its child
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	before := Tree(cmd.Process.Pid)
	s := SamplePSS(10*time.Millisecond, cmd.Process.Pid)
	r := SampleRSS(10*time.Millisecond, cmd.Process.Pid)
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the child said %q (%v)", line, err)
	}
	used := Tree(cmd.Process.Pid).Sub(before)
	s.Add(os.Getpid()) // a second root adds its resident set
	peak, rss := s.Stop(), r.Stop()
	in.Close()
	cmd.Wait()
	if used.User+used.Sys < 150*time.Millisecond || used.Faults < (64<<20)/4096 {
		t.Errorf("the tree used %+v, want ≥ 150ms of CPU and ≥ %d faults", used, (64<<20)/4096)
	}
	if peak.PeakRSS < 64<<20 || peak.PeakPSS < 64<<20 {
		t.Errorf("peak RSS %d, PSS %d, want ≥ 64 MiB", peak.PeakRSS, peak.PeakPSS)
	}
	if rss.PeakRSS < 64<<20 || rss.PeakPSS != 0 {
		t.Errorf("RSS only: peak RSS %d, PSS %d, want ≥ 64 MiB and none", rss.PeakRSS, rss.PeakPSS)
	}
}
