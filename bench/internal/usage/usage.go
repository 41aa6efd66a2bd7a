// Package usage measures what a command costs the machine when part of its
// work runs in processes that are not its descendants (a server it talks
// to), which the rusage of its wait does not count: the CPU time, system
// time and page faults of process trees read from /proc before and after,
// and, sampled while it runs, the peak of the sum of their resident set
// sizes and, in runs that are not timed (finding them costs the machine too
// much CPU), the peaks of the sum of their proportional set sizes and of
// the memory they hold, each page once.
package usage

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Usage is what a set of processes used.
type Usage struct {
	User, Sys time.Duration
	Faults    int64 // minor and major page faults
	// PeakRSS is the highest sum of the processes' resident set sizes
	// sampled, in bytes: a page several of them map counts for each.
	PeakRSS int64
	// PeakMemory is the most memory they held at once, in bytes: every
	// resident page once, however many of them map it (the LLVM libraries
	// that a compiler, lld and the workers all map, a fork's shared
	// pages), as the machine's RAM holds it. 0 when unknown (see frames).
	PeakMemory int64
	// PeakPSS is the highest sum of the processes' proportional set sizes
	// sampled (Pss of /proc/PID/smaps_rollup), in bytes: a page that n
	// processes map counts 1/n in each, so a page that only they map
	// counts once in all, and one that processes outside the set map too
	// (a shared library) less. 0 when unknown (not sampled).
	PeakPSS int64
}

// Add returns u plus v's CPU and faults; its peaks are u's.
func (u Usage) Add(v Usage) Usage {
	u.User += v.User
	u.Sys += v.Sys
	u.Faults += v.Faults
	return u
}

// Sub returns u less v's CPU and faults; its peaks are u's.
func (u Usage) Sub(v Usage) Usage {
	u.User -= v.User
	u.Sys -= v.Sys
	u.Faults -= v.Faults
	return u
}

// clock is the kernel's clock ticks per second (USER_HZ), as /proc counts.
const clock = 100

// Tree is what the process pid and all its descendants used so far: each
// live process's own CPU and faults, and, through its parent's counters,
// those of the descendants that have ended and been waited for. The zero
// Usage when pid is gone.
func Tree(pid int) Usage {
	var u Usage
	for _, p := range descendants(pid) {
		f := stat(p)
		if len(f) < 17 {
			continue
		}
		// Fields after the command: state(0) ppid pgrp session tty tpgid
		// flags minflt(7) cminflt majflt cmajflt utime(11) stime cutime
		// cstime(14).
		n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
		u.Faults += n(7) + n(8) + n(9) + n(10)
		u.User += time.Duration(n(11)+n(13)) * time.Second / clock
		u.Sys += time.Duration(n(12)+n(14)) * time.Second / clock
	}
	return u
}

// stat is /proc/pid/stat's fields after the command's name.
func stat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		return strings.Fields(s[i+1:])
	}
	return nil
}

// descendants is pid and every process below it, from the kernel's
// children lists of each of their threads.
func descendants(pid int) []int {
	out := []int{}
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		if err != nil {
			continue
		}
		out = append(out, p)
		for _, t := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + t.Name() + "/children")
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					todo = append(todo, n)
				}
			}
		}
	}
	return out
}

// SameAutogroupNice gives the scheduler autogroup of every process in
// pid's tree the nice value of this process's own (/proc/PID/autogroup),
// where they differ: a server a link starts with setsid is in an
// autogroup of its own, which the kernel's autogroup scheduling would
// otherwise weigh against the benchmark's, and a loaded machine would then
// slow the server's jobs and not the other methods'.
func SameAutogroupNice(pid int) {
	nice := ownAutogroupNice()
	for _, p := range descendants(pid) {
		setAutogroupNice(p, nice)
	}
}

// ownAutogroupNice is the nice value of this process's autogroup, "" if
// unknown.
func ownAutogroupNice() string {
	own, err := os.ReadFile("/proc/self/autogroup")
	if f := strings.Fields(string(own)); err == nil && len(f) >= 3 {
		return f[2]
	}
	return ""
}

// setAutogroupNice gives the autogroup of process pid the nice value nice
// ("" does nothing), unless it has it already.
func setAutogroupNice(pid int, nice string) {
	if nice == "" {
		return
	}
	path := "/proc/" + strconv.Itoa(pid) + "/autogroup"
	if b, err := os.ReadFile(path); err == nil && !strings.HasSuffix(strings.TrimSpace(string(b)), "nice "+nice) {
		os.WriteFile(path, []byte(nice), 0)
	}
}

// pss is process pid's proportional set size in bytes, from the Pss line
// of /proc/PID/smaps_rollup (a walk of its page tables: a fraction of a
// millisecond for a process that maps the LLVM libraries); 0 if it is
// gone.
func pss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			f := strings.Fields(rest) // "123 kB"
			if len(f) == 0 {
				return 0
			}
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rss is process pid's resident set size in bytes, from /proc/PID/statm
// (a few microseconds).
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// A Sampler follows the memory of process trees until stopped, and keeps
// them in the benchmark's autogroup nice value (SameAutogroupNice).
type Sampler struct {
	// frames, when PeakMemory and PeakPSS are sampled, is the set of page
	// frames of a sample (nil: RSS only); noFrames says that they cannot
	// be known.
	frames   map[uint64]struct{}
	noFrames bool

	nice  string // the benchmark's autogroup nice value
	mu    sync.Mutex
	roots []int
	niced map[int]bool // the processes given the autogroup nice value
	peak  Usage        // PeakRSS and PeakMemory
	stop  chan struct{}
	done  chan struct{}
}

// SampleRSS samples the resident set sizes of the trees of roots (and of
// those Add adds) every interval: cheap enough to leave the timing of what
// it samples alone. The Usage it returns has no PeakMemory.
func SampleRSS(interval time.Duration, roots ...int) *Sampler {
	return sample(interval, false, roots)
}

// SampleMemory samples their resident and proportional set sizes and the
// memory they hold, each page once. The last reads every process's page
// frames (frames): a millisecond or more of CPU for a process that maps
// the LLVM libraries, so that a link of half a dozen of them sampled every
// 10 ms loses a large share of a core to it; a run sampled this way must
// not be the one timed. PeakMemory needs root; without, it stays 0.
func SampleMemory(interval time.Duration, roots ...int) *Sampler {
	return sample(interval, true, roots)
}

func sample(interval time.Duration, memory bool, roots []int) *Sampler {
	s := &Sampler{nice: ownAutogroupNice(), roots: roots, niced: map[int]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if memory {
		s.frames = map[uint64]struct{}{}
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Add adds the tree of pid to what s samples.
func (s *Sampler) Add(pid int) {
	s.mu.Lock()
	s.roots = append(s.roots, pid)
	s.mu.Unlock()
	s.sample()
}

func (s *Sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum, pssSum int64
	clear(s.frames)
	for _, r := range s.roots {
		for _, p := range descendants(r) {
			sum += rss(p)
			if s.frames != nil {
				pssSum += pss(p)
				if !s.noFrames && frames(p, s.frames) != nil {
					s.noFrames = true
				}
			}
			if !s.niced[p] {
				s.niced[p] = true
				setAutogroupNice(p, s.nice)
			}
		}
	}
	s.peak.PeakRSS = max(s.peak.PeakRSS, sum)
	s.peak.PeakPSS = max(s.peak.PeakPSS, pssSum)
	if s.frames != nil && !s.noFrames {
		s.peak.PeakMemory = max(s.peak.PeakMemory, int64(len(s.frames)*os.Getpagesize()))
	}
}

// Stop ends the sampling and returns the highest figures seen (PeakRSS,
// PeakPSS: 0 unless SampleMemory; PeakMemory: 0 if its frames could not be
// read).
func (s *Sampler) Stop() Usage {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noFrames {
		s.peak.PeakMemory = 0
	}
	return s.peak
}
