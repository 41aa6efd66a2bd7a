// Package machine measures how busy the benchmark's machine is: it waits
// for a quiet machine before a timed command, and measures the share of
// the CPU that other processes took while it ran, and the VM's steal time.
package machine

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The machine may be shared (other builds and tests on the same cores), and
// a benchmark on 2 cores is at the mercy of anything else running. So every
// timed command waits first for the machine to be quiet, and the CPU time
// that other processes used while it ran is recorded with it: a run whose
// interference exceeds -max-interference is repeated.

// cpuFields reads the first line of /proc/stat: the whole machine's time
// in each state (clock ticks), user, nice, system, idle, iowait, irq,
// softirq, steal, and the guest times.
func cpuFields() ([]int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return nil, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	v := make([]int64, len(f)-1)
	for i, s := range f[1:] {
		v[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return v, nil
}

// cpuTicks reads the whole machine's busy and total time from /proc/stat
// (clock ticks).
func cpuTicks() (busy, total int64, err error) {
	v, err := cpuFields()
	if err != nil {
		return 0, 0, err
	}
	for i := range min(len(v), 8) { // guest time is already counted in user
		total += v[i]
		if i != 3 && i != 4 { // idle, iowait
			busy += v[i]
		}
	}
	return busy, total, nil
}

// Tick is a clock tick (USER_HZ = 100), the unit of /proc's CPU times.
const Tick = 10 * time.Millisecond

// Stolen is the machine's steal time so far (/proc/stat): time the
// hypervisor ran something else while this VM's CPUs wanted to run. A
// link that stalls as a whole (every execution ends at once, late) with
// steal time beside it was paused by the host, not by thindist.
func Stolen() time.Duration {
	v, err := cpuFields()
	if err != nil {
		return 0
	}
	return time.Duration(v[7]) * Tick
}

// WaitQuiet waits until a window of the machine is at most maxBusy busy, or
// until timeout, and returns the busy fraction of the last window.
func WaitQuiet(ctx context.Context, maxBusy float64, timeout time.Duration) float64 {
	deadline := time.Now().Add(timeout)
	frac := 1.0
	for {
		b0, t0, err := cpuTicks()
		if err != nil {
			return 0
		}
		select {
		case <-ctx.Done():
			return frac
		case <-time.After(500 * time.Millisecond):
		}
		b1, t1, _ := cpuTicks()
		if t1 > t0 {
			frac = float64(b1-b0) / float64(t1-t0)
		}
		if frac <= maxBusy || time.Now().After(deadline) {
			return frac
		}
	}
}

// A Probe measures the share of the machine's CPU capacity that processes
// other than a command used while it ran.
type Probe struct{ busy0 int64 }

// StartProbe starts measuring, just before the command starts.
func StartProbe() Probe {
	b, _, _ := cpuTicks()
	return Probe{busy0: b}
}

// Others is the share of the machine's CPU capacity (wall × cores) that
// processes other than the command, which used own, took in its wall time.
func (p Probe) Others(wall, own time.Duration) float64 {
	b, _, _ := cpuTicks()
	busy := time.Duration(b-p.busy0) * Tick
	other := busy - own
	if other < 0 || wall <= 0 {
		return 0
	}
	return float64(other) / (float64(wall) * float64(runtime.NumCPU()))
}
