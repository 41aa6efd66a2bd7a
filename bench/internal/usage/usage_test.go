package usage

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestTreeAndSampler: a shell whose child touches 64 MiB, spins a little,
// forks (the grandchild shares those 64 MiB) and says so: the child's CPU
// and faults show in the shell's Tree; both Samplers see RSS count the
// shared pages twice, and the memory one sees them held once, in its PSS
// and in its page frames.
func TestTreeAndSampler(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sh", "-c", `python3 -c '
import os, sys, time
b = bytearray(64 << 20)
for i in range(0, len(b), 4096): b[i] = 1
t = time.process_time()
while time.process_time() - t < 0.2: pass
if os.fork() == 0:
    sys.stdin.read()
    os._exit(0)
print("ready", flush=True)
sys.stdin.read()
os.wait()
'; true`) // the shell forks: python is its child
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	before := Tree(cmd.Process.Pid)
	s := SampleMemory(10*time.Millisecond, cmd.Process.Pid)
	r := SampleRSS(10*time.Millisecond, cmd.Process.Pid)
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the child said %q (%v)", line, err)
	}
	used := Tree(cmd.Process.Pid).Sub(before)
	time.Sleep(50 * time.Millisecond) // a sample or more with both processes
	s.Add(os.Getpid())                // a second root adds its pages
	peak, rssOnly := s.Stop(), r.Stop()
	in.Close()
	cmd.Wait()
	if used.User+used.Sys < 150*time.Millisecond || used.Faults < (64<<20)/4096 {
		t.Errorf("the tree used %+v, want ≥ 150ms of CPU and ≥ %d faults", used, (64<<20)/4096)
	}
	if peak.PeakRSS < 128<<20 || rssOnly.PeakRSS < 128<<20 || rssOnly.PeakMemory != 0 {
		t.Errorf("peak RSS %d and %d (RSS only, memory %d), want ≥ 128 MiB both and no memory",
			peak.PeakRSS, rssOnly.PeakRSS, rssOnly.PeakMemory)
	}
	// PSS counts the shared 64 MiB once too, and needs no root: at least
	// those 64 MiB, and well below the RSS sum of the same samples, which
	// counts them twice for each time the shell's tree is walked (twice:
	// this process's tree holds it again).
	if peak.PeakPSS < 64<<20 || peak.PeakPSS > peak.PeakRSS-96<<20 || rssOnly.PeakPSS != 0 {
		t.Errorf("peak PSS %d MiB with a peak RSS of %d MiB (RSS only: PSS %d), want ≥ 64 MiB, the shared 64 MiB counted once, and none",
			peak.PeakPSS>>20, peak.PeakRSS>>20, rssOnly.PeakPSS)
	}
	if peak.PeakMemory == 0 {
		if os.Geteuid() != 0 {
			t.Skip("no page frame numbers without root: PeakMemory unknown")
		}
		t.Fatal("no PeakMemory as root")
	}
	// The 64 MiB the two processes share count once: the memory held is
	// about 64 MiB of data plus two Pythons and this test, well below the
	// sum of their RSS (that of the shell's tree alone: s has this process
	// as a second root, whose tree holds the shell's again).
	if peak.PeakMemory < 64<<20 || peak.PeakMemory > rssOnly.PeakRSS-48<<20 {
		t.Errorf("peak memory %d MiB with a peak RSS of %d MiB, want ≥ 64 MiB and the shared 64 MiB counted once",
			peak.PeakMemory>>20, rssOnly.PeakRSS>>20)
	}
}
