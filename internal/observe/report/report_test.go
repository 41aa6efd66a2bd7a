package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestSummaryLine(t *testing.T) {
	acts := make([]*action.Action, 6)
	for i := range acts {
		acts[i] = &action.Action{ID: fmt.Sprintf("m%d.o", i)}
	}
	type fin struct {
		res *executor.Result
		err error
	}
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		runs []fin // what the first len(runs) actions ended with
		want string
	}{
		{"all done", []fin{
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}, Wall: 300 * ms}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.LocalCache}, Wall: 900 * ms}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.RemoteCache}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Remote}, Wall: 700 * ms}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}, Wall: 100 * ms}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}, Wall: 200 * ms}, nil},
		}, `^thindist: 6 jobs, 0 failed, 2 cached, 1 remote, 3 local in 2.5s; slowest m3\.o \(700ms\)$`},
		{"nothing compiled: no slowest", []fin{
			{&executor.Result{Provenance: executor.Provenance{Where: executor.LocalCache}, Wall: 900 * ms}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.RemoteCache}, Wall: 100 * ms}, nil},
		}, `^thindist: 6 jobs, 0 failed, 2 cached, 0 remote, 0 local, 4 not started in 2.5s$`},
		{"races say who won", []fin{
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local, Race: executor.SecondWon}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Remote, Race: executor.FirstWon}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Remote}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil},
		}, `^thindist: 6 jobs, 0 failed, 0 cached, 2 remote, 4 local \(2 raced, 1 won here\) in `},
		{"a failure stops the run", []fin{
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil},
			{&executor.Result{Exit: proc.Exit{ExitCode: 1}}, errors.New("m1.o: exit status 1")},
			{&executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil},
		}, `^thindist: 6 jobs, 1 failed, 0 cached, 0 remote, 2 local, 3 not started in `},
		{"an interrupt is not a failure", []fin{
			{&executor.Result{Provenance: executor.Provenance{Where: executor.LocalCache}}, nil},
			{nil, fmt.Errorf("m1.o: %w", context.Canceled)},
			{nil, context.Canceled},
		}, `^thindist: 6 jobs, 0 failed, 1 cached, 0 remote, 0 local, 2 stopped, 3 not started in `},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			s := NewSummary(NewTimeline(clock.Now(), clock.Now))
			s.Planned(len(acts), nil)
			for i, f := range c.runs {
				s.Started(acts[i], 0)
				s.Finished(acts[i], 0, f.res, f.err)
			}
			clock.Advance(2500 * ms)
			if got := s.Line(); !regexp.MustCompile(c.want).MatchString(got) {
				t.Errorf("summary %q, want it to match %q", got, c.want)
			}
		})
	}
}

// TestSummaryWallTime: the line's time is the run's wall time from when
// the caller's run began (a `thindist link` before its thin link, a
// distributor before connecting to its remote service), not from when the
// backends started, and it says where the time went.
func TestSummaryWallTime(t *testing.T) {
	clock := newFakeClock()
	start := clock.Now()
	tl := NewTimeline(start, clock.Now)
	s := NewSummary(tl)
	s.Output = "app"
	a := &action.Action{ID: "big.o"}

	end := tl.Begin("thin link")
	clock.Advance(400 * time.Millisecond)
	end()
	end = tl.Begin("connecting")
	clock.Advance(1200 * time.Millisecond)
	end()
	end = tl.Begin("backends")
	s.Planned(1, nil)
	s.Started(a, 0)
	clock.Advance(700 * time.Millisecond)
	s.Finished(a, 0, &executor.Result{Provenance: executor.Provenance{Where: executor.Remote}, Wall: 650 * time.Millisecond}, nil)
	end()
	end = tl.Begin("final link")
	clock.Advance(200 * time.Millisecond)
	end()
	// Two parts of the run tell of the same phase (the workers, the fork
	// servers a race's niced tries used): both are said.
	tl.Detail("backends", "1 on workers")
	tl.Detail("backends", "40ms starting 1 fork server")

	want := "thindist: app: 1 jobs, 0 failed, 0 cached, 1 remote, 0 local in 2.5s " +
		"(thin link 400ms, connecting 1.2s, backends 700ms including 1 on workers, 40ms starting 1 fork server, final link 200ms); " +
		"slowest big.o (650ms)"
	if got := s.Line(); got != want {
		t.Errorf("summary\n %q, want\n %q", got, want)
	}

	// Work before the run began (lld's, for a DTLTO distributor) is shown
	// as such and is not part of the run's own time.
	clock = newFakeClock()
	start = clock.Now()
	tl = NewTimeline(start, clock.Now)
	tl.Add("lld", start.Add(-300*time.Millisecond), start)
	s = NewSummary(tl)
	s.Planned(0, nil)
	clock.Advance(50 * time.Millisecond)
	if got, want := s.Line(), "thindist: 0 jobs, 0 failed, 0 cached, 0 remote, 0 local in 50ms, after lld's 300ms"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}

	// The phases within the run add up to its time: what none covers is
	// "other"; the time before it is outside the bracket.
	end = tl.Begin("backends")
	clock.Advance(30 * time.Millisecond)
	end()
	clock.Advance(20 * time.Millisecond)
	if got, want := s.Line(), "thindist: 0 jobs, 0 failed, 0 cached, 0 remote, 0 local in 100ms (backends 30ms, other 70ms), after lld's 300ms"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestProgressStopsForGood: after Stop, no redraw (a tick already being
// handled, a late event) brings the progress line back below what follows.
func TestProgressStopsForGood(t *testing.T) {
	var out bytes.Buffer
	c := NewConsole(&out, true)
	clock := newFakeClock()
	tick := make(chan time.Time)
	p := newProgress(c, NewTimeline(clock.Now(), clock.Now), tick)
	p.Planned(3, nil)
	tick <- clock.Now() // handled by the ticker goroutine
	p.Stop()
	c.Printf("thindist: the summary")
	cleared := out.Len()
	// What a redraw racing with Stop would do.
	p.draw(true)
	p.Started(&action.Action{ID: "m.o"}, 0)
	if rest := out.String()[cleared:]; rest != "" {
		t.Errorf("after Stop and the summary, the console wrote %q", rest)
	}
	if !strings.HasSuffix(out.String(), "\r\x1b[Kthindist: the summary\n") {
		t.Errorf("the progress line was not cleared before the summary: %q", out.String())
	}
}

// TestProgressQueued: actions waiting for a local slot (a jobserver
// token) are queued, not running.
func TestProgressQueued(t *testing.T) {
	var out bytes.Buffer
	c := NewConsole(&out, true)
	clock := newFakeClock()
	p := newProgress(c, NewTimeline(clock.Now(), clock.Now), nil)
	defer p.Stop()
	acts := []*action.Action{{ID: "a.o"}, {ID: "b.o"}, {ID: "c.o"}}
	p.Planned(len(acts), nil)
	for _, a := range acts {
		p.Started(a, 0)
	}
	p.WaitingForSlot(acts[1])
	p.WaitingForSlot(acts[2])
	p.draw(true)
	if got := lastLine(out.String()); got != "thindist: 0/3 done, 1 running: a.o 0s; 2 queued; 0s" {
		t.Errorf("progress %q, want 1 running and 2 queued", got)
	}
	p.DoneWaiting(acts[1])
	clock.Advance(time.Second)
	p.draw(true)
	if got := lastLine(out.String()); got != "thindist: 0/3 done, 2 running: a.o 1s, b.o 1s; 1 queued; 1s" {
		t.Errorf("progress %q, want 2 running and 1 queued", got)
	}
}

// lastLine is the last progress line drawn.
func lastLine(s string) string {
	i := strings.LastIndex(s, "\r\x1b[K")
	return s[i+len("\r\x1b[K"):]
}

// fakeTerminal is a console of width columns whose progress line the
// test reads.
func fakeTerminal(width int) (*Console, *bytes.Buffer) {
	var out bytes.Buffer
	c := NewConsole(&out, true)
	c.Width = func() int { return width }
	return c, &out
}

// TestProgressLine: the line names the running modules, longest-running
// first, says how many wait and how many are done, and estimates the time
// left from the modules' expected times over the slots seen busy.
func TestProgressLine(t *testing.T) {
	c, out := fakeTerminal(120)
	clock := newFakeClock()
	tick := make(chan time.Time)
	p := newProgress(c, NewTimeline(clock.Now(), clock.Now), tick)
	defer p.Stop()
	acts := []*action.Action{{ID: "big.o"}, {ID: "lib/libu.a(u.o)"}, {ID: "c.o"}, {ID: "d.o"}}
	est := expecting(acts, 4*time.Second, 2*time.Second, 2*time.Second, 2*time.Second)
	p.Expect(acts, est)
	p.Planned(len(acts), nil)
	p.Started(acts[0], 0)
	clock.Advance(time.Second)
	p.Started(acts[1], 1)
	p.Started(acts[2], 2)
	p.WaitingForSlot(acts[2])
	tick <- clock.Now()
	tick <- clock.Now() // the first is handled once the second is taken
	// No compile has finished: no basis for an estimate yet.
	want := "thindist: 0/4 done, 2 running: big.o 1s, lib/libu.a(u.o) 0s; 2 queued; 1s"
	if got := lastLine(out.String()); got != want {
		t.Errorf("progress\n %q, want\n %q", got, want)
	}
	// big.o took 2s of its expected 4s: the rest is scaled by half.
	clock.Advance(time.Second)
	p.Finished(acts[0], 0, &executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil)
	p.Started(acts[3], 0)
	p.DoneWaiting(acts[2])
	clock.Advance(time.Second)
	p.draw(true)
	// Left: 6s expected, 3s scaled, less what u.o (2s of its 1s scaled),
	// c.o and d.o (1s each) have run: 0s over 2 slots.
	want = "thindist: 1/4 done, 3 running: lib/libu.a(u.o) 2s, c.o 1s, d.o 1s; 3s, under 1s left"
	if got := lastLine(out.String()); got != want {
		t.Errorf("progress\n %q, want\n %q", got, want)
	}

	// A narrow terminal: the names that fit, the count of the others.
	c.Width = func() int { return 80 }
	p.draw(true)
	got := lastLine(out.String())
	if want := "thindist: 1/4 done, 3 running: lib/libu.a(u.o) 2s, +2; 3s, under 1s left"; got != want {
		t.Errorf("progress on 80 columns\n %q, want\n %q", got, want)
	}
	if len(got) >= 80 {
		t.Errorf("the line has %d characters on an 80-column terminal", len(got))
	}
}

// TestProgressEstimate: with earlier runs' times far below this run's (a
// fork server starting, a loaded machine), the line gives no estimate
// until a compile has finished, then scales by it; it never says "0s
// left" while work is queued. It names the output.
func TestProgressEstimate(t *testing.T) {
	c, out := fakeTerminal(200)
	clock := newFakeClock()
	p := newProgress(c, NewTimeline(clock.Now(), clock.Now), nil)
	p.name = "app"
	defer p.Stop()
	var acts []*action.Action
	for i := range 13 {
		acts = append(acts, &action.Action{ID: fmt.Sprintf("m%02d.o", i)})
	}
	est := expecting(acts, slices.Repeat([]time.Duration{30 * time.Millisecond}, len(acts))...)
	p.Expect(acts, est)
	p.Planned(len(acts), nil)
	p.Started(acts[0], 0)
	p.Started(acts[1], 1)
	p.slots = 2 // as a tick sees them
	clock.Advance(1500 * time.Millisecond)
	p.draw(true)
	if got := lastLine(out.String()); got != "thindist: app: 0/13 done, 2 running: m00.o 1.5s, m01.o 1.5s; 11 queued; 1.5s" {
		t.Errorf("before a compile finished: %q, want no estimate", got)
	}
	// m00.o took 1.5s against 30ms expected: 50 times as long.
	p.Finished(acts[0], 0, &executor.Result{Provenance: executor.Provenance{Where: executor.Local}}, nil)
	p.Started(acts[2], 0)
	p.draw(true)
	// Left: 12 × 30ms × 50 = 18s, less m01.o's 1.5s: 16.5s over 2 slots.
	if got := lastLine(out.String()); !strings.HasSuffix(got, "; 10 queued; 1.5s, about 8s left") || !strings.HasPrefix(got, "thindist: app: 1/13 done") {
		t.Errorf("after a compile finished: %q, want about 8s left", got)
	}
	// A cache hit is no basis: it takes no compile's time.
	q := newProgress(c, NewTimeline(clock.Now(), clock.Now), nil)
	defer q.Stop()
	q.Expect(acts[:2], est)
	q.Planned(2, nil)
	q.Started(acts[0], 0)
	q.Started(acts[1], 1)
	q.slots = 2
	q.Finished(acts[0], 0, &executor.Result{Provenance: executor.Provenance{Where: executor.LocalCache}}, nil)
	if got := q.line(clock.Now(), 200); strings.Contains(got, "left") {
		t.Errorf("after a cache hit alone: %q, want no estimate", got)
	}
}

// TestTerminalTurns: two links writing to one terminal take turns at the
// progress line: the second draws none while the first's stands (its
// messages still print, on a line of their own), and takes the line over
// once the first is done.
func TestTerminalTurns(t *testing.T) {
	dir := t.TempDir()
	tty := filepath.Join(dir, "tty") // one file both write to, as a terminal
	fa, err := os.Create(tty)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.OpenFile(tty, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	fa.Seek(0, 2)
	a, b := NewConsole(fa, true), NewConsole(fb, true)
	a.Width, b.Width = func() int { return 80 }, func() int { return 80 }
	lockDir := filepath.Join(dir, "run")
	releaseA, releaseB := a.ShareTerminal(lockDir, fa), b.ShareTerminal(lockDir, fb)
	defer releaseB()
	written := func() string {
		t.Helper()
		data, err := os.ReadFile(tty)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	a.setLine("thindist: a: 1/4 done")
	b.setLine("thindist: b: 0/9 done")
	if got := written(); got != "thindist: a: 1/4 done" {
		t.Fatalf("the terminal shows %q, want a's line alone", got)
	}
	b.Printf("thindist: b: warning")
	if got := written(); !strings.HasSuffix(got, "thindist: a: 1/4 done\r\x1b[Kthindist: b: warning\n") {
		t.Errorf("b's message %q, want it on a line of its own", got)
	}
	a.setLine("thindist: a: 2/4 done")
	releaseA() // a's link ends
	n := len(written())
	b.setLine("thindist: b: 1/9 done")
	if got := written()[n:]; got != "thindist: b: 1/9 done" {
		t.Errorf("after a ended, b drew %q, want its line", got)
	}
}

// TestProgressDrawsTheLatest: an event right after another is not drawn
// at once (the throttle), but the next tick draws the state it left.
func TestProgressDrawsTheLatest(t *testing.T) {
	c, out := fakeTerminal(120)
	clock := newFakeClock()
	tick := make(chan time.Time)
	p := newProgress(c, NewTimeline(clock.Now(), clock.Now), tick)
	defer p.Stop()
	a, b, d := &action.Action{ID: "a.o"}, &action.Action{ID: "b.o"}, &action.Action{ID: "d.o"}
	p.Planned(3, nil)
	p.Started(a, 0)
	clock.Advance(time.Second)
	p.Started(b, 1)
	p.Finished(a, 0, &executor.Result{}, nil)
	p.Started(d, 0) // within the throttle of the Finished redraw
	if got := lastLine(out.String()); strings.Contains(got, "d.o") {
		t.Fatalf("the throttle did not hold: %q", got)
	}
	tick <- clock.Now()
	tick <- clock.Now()
	if got, want := lastLine(out.String()), "thindist: 1/3 done, 2 running: b.o 0s, d.o 0s; 1s"; got != want {
		t.Errorf("after a tick the line is\n %q, want\n %q", got, want)
	}
}

// TestIsTerminal: only a terminal is one; /dev/null, a character device
// too, is not (a build sending thindist's output there would otherwise
// draw a live progress line into it all link long).
func TestIsTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"/dev/null": null, "a file": file, "a pipe": w} {
		if IsTerminal(f) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}

	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	defer master.Close()
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if !IsTerminal(tty) {
		t.Errorf("the pseudo-terminal %s is not taken for a terminal", tty.Name())
	}
}

// expecting is the scheduler's estimates of acts, acts[i] expected to
// take expected[i].
func expecting(acts []*action.Action, expected ...time.Duration) *schedule.Estimates {
	m := map[*action.Action]time.Duration{}
	for i, a := range acts {
		m[a] = expected[i]
	}
	return schedule.NewEstimates(nil, m)
}
