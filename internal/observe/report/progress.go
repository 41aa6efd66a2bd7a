package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// Progress keeps a line on the console that says what the run is doing:
//
//	thindist: app: 3/12 done, 2 running: big.o 4.1s, lib/libu.a(u.o) 0.8s; 7 queued; 1.2s, about 6s left
//
// The running modules come longest-running first, as many as the
// terminal's width leaves room for. An action is running once it holds a
// local process slot or is in flight with a remote service; one waiting
// for a slot (a --jobs slot, a token of make's jobserver: the local
// executor tells its Job's Events, which the scheduler passes on to
// Progress as a schedule.SlotObserver), or not yet taken up, is queued. The estimate is the expected time of the work left
// (schedule.Estimates, from earlier runs), scaled by how long this run's
// compiles took against their expected times, over the slots seen running
// at once at a tick: shown when every action left has an expected time and
// at least one compile has finished (the basis of the scale: earlier runs'
// times are compile times, without this machine's load or a fork server's
// start), and never as "0s" while work is left.
//
// An event redraws the line at once unless it was drawn less than
// minRedraw ago; then the next tick draws the latest state.
type Progress struct {
	c    *Console
	tl   *Timeline
	name string // the link's output, "" for none

	mu sync.Mutex
	// total: planned; done: finished; failed: of those, failed.
	total, done, failed int
	// started: taken up by the scheduler, not finished; waiting: of
	// those, waiting for a local slot.
	started  map[*action.Action]bool
	waiting  map[*action.Action]bool
	running  map[*action.Action]time.Time // since when
	slots    int                          // the most seen running at once
	left     time.Duration                // the Expected of the actions not finished
	unknown  int                          // actions not finished without an Expected
	expected bool                         // Expect was called
	est      *schedule.Estimates          // the expected durations, set by Expect
	// tookExpected and took: the Expected of the compiles finished and
	// how long they ran, the scale of the estimate.
	tookExpected, took time.Duration
	last               time.Time // last drawn
	dirty              bool      // changed since

	stop, stopped chan struct{}
	once          sync.Once
}

const (
	// minRedraw is the least time between two redraws for events.
	minRedraw = 100 * time.Millisecond
	// tickRedraw is how often the line is redrawn without events, to
	// move the clocks.
	tickRedraw = 500 * time.Millisecond
)

// NewProgress returns a progress observer on c for the link of output
// (named at the line's head; "" names none) that shows the time since the
// start of tl.
func NewProgress(c *Console, tl *Timeline, output string) *Progress {
	t := time.NewTicker(minRedraw)
	p := newProgress(c, tl, t.C)
	p.name = output
	go func() { <-p.stopped; t.Stop() }()
	return p
}

// newProgress redraws on ticks from tick (tests give their own).
func newProgress(c *Console, tl *Timeline, tick <-chan time.Time) *Progress {
	p := &Progress{c: c, tl: tl, started: map[*action.Action]bool{}, waiting: map[*action.Action]bool{},
		running: map[*action.Action]time.Time{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.tick(tick)
	return p
}

// tick draws what events changed and were not drawn, and keeps the clocks
// moving while long backends run.
func (p *Progress) tick(tick <-chan time.Time) {
	defer close(p.stopped)
	for {
		select {
		case <-p.stop:
			return
		case <-tick:
			p.mu.Lock()
			due := p.dirty || p.tl.Now().Sub(p.last) >= tickRedraw
			p.slots = max(p.slots, len(p.running))
			p.mu.Unlock()
			if due {
				p.draw(true)
			}
		}
	}
}

// Stop ends the progress line for good: the ticker is stopped before the
// line is cleared, and the console draws no progress line afterwards, so a
// redraw already under way cannot bring it back below the summary.
func (p *Progress) Stop() {
	p.once.Do(func() { close(p.stop) })
	<-p.stopped
	p.c.ClearLine()
}

// Planned implements schedule.Observer.
func (p *Progress) Planned(n int, _ *schedule.Estimates) {
	p.update(func() { p.total = n })
	p.draw(true)
}

// Started implements schedule.Observer.
func (p *Progress) Started(a *action.Action, _ int) {
	p.update(func() {
		p.started[a] = true
		if !p.waiting[a] {
			p.run(a)
		}
	})
}

// Finished implements schedule.Observer.
func (p *Progress) Finished(a *action.Action, _ int, res *executor.Result, err error) {
	p.update(func() {
		if since, ok := p.running[a]; ok && err == nil && res != nil && !res.Where.Cached() && p.est.Expected(a) > 1 {
			p.tookExpected += p.est.Expected(a)
			p.took += p.tl.Now().Sub(since)
		}
		delete(p.started, a)
		delete(p.waiting, a)
		delete(p.running, a)
		p.done++
		switch {
		case !p.expected:
		case p.est.Expected(a) > 1:
			p.left -= p.est.Expected(a)
		default:
			p.unknown--
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			p.failed++
		}
	})
}

// WaitingForSlot implements schedule.SlotObserver.
func (p *Progress) WaitingForSlot(a *action.Action) {
	p.update(func() { p.waiting[a] = true; delete(p.running, a) })
}

// DoneWaiting implements schedule.SlotObserver.
func (p *Progress) DoneWaiting(a *action.Action) {
	p.update(func() {
		delete(p.waiting, a)
		if p.started[a] {
			p.run(a)
		}
	})
}

// run marks a running from now; p.mu is held. (The slots are counted at
// ticks, not here: an action is running from Started until its executor
// says it waits for a slot, which it says just after.)
func (p *Progress) run(a *action.Action) { p.running[a] = p.tl.Now() }

// update changes the state under the lock, then redraws unless the line
// was drawn less than minRedraw ago (the next tick draws it then).
func (p *Progress) update(f func()) {
	p.mu.Lock()
	f()
	p.dirty = true
	p.mu.Unlock()
	p.draw(false)
}

// Expect tells Progress the actions of the run and the scheduler's
// estimates of them, for its estimate (their expected durations). Call it
// before the run.
func (p *Progress) Expect(actions []*action.Action, est *schedule.Estimates) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected, p.est = true, est
	for _, a := range actions {
		if d := est.Expected(a); d > 1 {
			p.left += d
		} else {
			p.unknown++
		}
	}
}

func (p *Progress) draw(force bool) {
	p.mu.Lock()
	now := p.tl.Now()
	if !force && now.Sub(p.last) < minRedraw {
		p.mu.Unlock()
		return
	}
	p.last, p.dirty = now, false
	width := 80
	if p.c.Width != nil {
		width = p.c.Width()
	}
	s := p.line(now, width)
	p.mu.Unlock()
	p.c.setLine(s)
}

// line renders the state at now in at most width columns; p.mu is held.
func (p *Progress) line(now time.Time, width int) string {
	head := "thindist: "
	if p.name != "" {
		head += p.name + ": "
	}
	head += fmt.Sprintf("%d/%d done, %d running", p.done, p.total, len(p.running))
	tail := ""
	if q := p.total - p.done - len(p.running); q > 0 {
		tail += fmt.Sprintf("; %d queued", q)
	}
	if p.failed > 0 {
		tail += fmt.Sprintf("; %d failed", p.failed)
	}
	tail += "; " + now.Sub(p.tl.Start()).Round(100*time.Millisecond).String()
	if eta, ok := p.eta(now); ok {
		if eta < time.Second {
			tail += ", under 1s left"
		} else {
			tail += ", about " + eta.Round(time.Second).String() + " left"
		}
	}
	// The running modules, longest-running first, while they fit.
	type run struct {
		name  string
		since time.Time
	}
	var runs []run
	for a, t := range p.running {
		runs = append(runs, run{a.ID, t})
	}
	sort.Slice(runs, func(i, j int) bool {
		if !runs[i].since.Equal(runs[j].since) {
			return runs[i].since.Before(runs[j].since)
		}
		return runs[i].name < runs[j].name
	})
	var names []string
	room := width - 1 - len(head) - len(tail) - len(": ")
	for i, r := range runs {
		n := fmt.Sprintf("%s %s", r.name, now.Sub(r.since).Round(100*time.Millisecond))
		more := ""
		if rest := len(runs) - i - 1; rest > 0 {
			more = fmt.Sprintf(", +%d", rest)
		}
		if len(strings.Join(append(names, n), ", "))+len(more) > room {
			break
		}
		names = append(names, n)
	}
	if len(names) > 0 {
		list := strings.Join(names, ", ")
		if rest := len(runs) - len(names); rest > 0 {
			list += fmt.Sprintf(", +%d", rest)
		}
		head += ": " + list
	}
	line := head + tail
	if width > 1 && len(line) > width-1 {
		line = line[:width-1]
	}
	return line
}

// eta estimates the time left: the expected time of the actions not
// finished, scaled by this run's compiles so far (took over tookExpected),
// less what the running ones have run, over the slots; ok is false without
// an expected time for every one of them or before a compile has
// finished.
func (p *Progress) eta(now time.Time) (time.Duration, bool) {
	if !p.expected || p.unknown > 0 || p.total == 0 || p.slots == 0 || p.left <= 0 || p.tookExpected <= 0 || p.took <= 0 {
		return 0, false
	}
	scale := float64(p.took) / float64(p.tookExpected)
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	left := scaled(p.left)
	for a, since := range p.running {
		left -= min(now.Sub(since), scaled(p.est.Expected(a)))
	}
	return max(left/time.Duration(p.slots), 0), true
}
