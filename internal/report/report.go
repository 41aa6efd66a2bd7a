// Package report tells the user what a run is doing and did: a live progress
// line on a terminal, one summary line at the end, and a Chrome trace. Each
// is a schedule.Observer; Tee combines them.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/schedule"
)

// Tee returns an observer that tells each of obs in turn.
func Tee(obs ...schedule.Observer) schedule.Observer { return tee(obs) }

type tee []schedule.Observer

func (t tee) Planned(n int) {
	for _, o := range t {
		o.Planned(n)
	}
}
func (t tee) Started(a *action.Action, slot int) {
	for _, o := range t {
		o.Started(a, slot)
	}
}
func (t tee) Finished(a *action.Action, slot int, res *executor.Result, err error) {
	for _, o := range t {
		o.Finished(a, slot, res, err)
	}
}

// IsTerminal reports whether f is a character device, i.e. a terminal.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Console serialises writes to stderr and keeps a live progress line, when
// there is one, below everything else printed.
type Console struct {
	mu      sync.Mutex
	w       io.Writer
	live    bool   // a progress line is drawn
	line    string // its text
	enabled bool   // progress lines are wanted (a terminal)
}

// NewConsole writes to w; progress lines are drawn only if live is true.
func NewConsole(w io.Writer, live bool) *Console { return &Console{w: w, enabled: live} }

// Printf prints a message on lines of its own.
func (c *Console) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	io.WriteString(c.w, msg)
	c.redrawLocked()
}

func (c *Console) setLine(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return
	}
	c.line = s
	c.clearLocked()
	c.redrawLocked()
}

// ClearLine removes the progress line for good.
func (c *Console) ClearLine() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.line = ""
}

func (c *Console) clearLocked() {
	if c.live {
		io.WriteString(c.w, "\r\x1b[K")
		c.live = false
	}
}

func (c *Console) redrawLocked() {
	if c.enabled && c.line != "" {
		io.WriteString(c.w, c.line)
		c.live = true
	}
}

// Progress redraws "done/total, running, elapsed" on the console at most
// ten times a second.
type Progress struct {
	c       *Console
	start   time.Time
	mu      sync.Mutex
	total   int
	done    int
	running int
	failed  int
	last    time.Time
	stop    chan struct{}
	once    sync.Once
}

// NewProgress returns a progress observer on c.
func NewProgress(c *Console) *Progress {
	p := &Progress{c: c, start: time.Now(), stop: make(chan struct{})}
	go p.tick()
	return p
}

// tick keeps the elapsed time moving while long backends run.
func (p *Progress) tick() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw(true)
		}
	}
}

// Stop ends the progress line.
func (p *Progress) Stop() {
	p.once.Do(func() { close(p.stop) })
	p.c.ClearLine()
}

func (p *Progress) Planned(n int) { p.mu.Lock(); p.total = n; p.mu.Unlock(); p.draw(true) }
func (p *Progress) Started(*action.Action, int) {
	p.mu.Lock()
	p.running++
	p.mu.Unlock()
	p.draw(false)
}
func (p *Progress) Finished(_ *action.Action, _ int, _ *executor.Result, err error) {
	p.mu.Lock()
	p.running--
	p.done++
	if err != nil && !errors.Is(err, context.Canceled) {
		p.failed++
	}
	p.mu.Unlock()
	p.draw(false)
}

func (p *Progress) draw(force bool) {
	p.mu.Lock()
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond {
		p.mu.Unlock()
		return
	}
	p.last = now
	s := fmt.Sprintf("thindist: %d/%d done, %d running", p.done, p.total, p.running)
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.failed)
	}
	s += fmt.Sprintf(", %s", now.Sub(p.start).Round(100*time.Millisecond))
	p.mu.Unlock()
	p.c.setLine(s)
}

// Summary counts what happened, for the line printed at the end.
type Summary struct {
	mu        sync.Mutex
	start     time.Time
	begun     map[*action.Action]time.Time
	Jobs      int
	Failed    int
	Stopped   int // interrupted while running (context cancelled), not failed
	Cached    int
	Remote    int
	Local     int
	SavedCPU  time.Duration
	Slowest   string
	SlowestIn time.Duration
}

// NewSummary starts counting now.
func NewSummary() *Summary {
	return &Summary{start: time.Now(), begun: map[*action.Action]time.Time{}}
}

func (s *Summary) Planned(n int) { s.mu.Lock(); s.Jobs = n; s.mu.Unlock() }
func (s *Summary) Started(a *action.Action, _ int) {
	s.mu.Lock()
	s.begun[a] = time.Now()
	s.mu.Unlock()
}
func (s *Summary) Finished(a *action.Action, _ int, res *executor.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Since(s.begun[a])
	delete(s.begun, a)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			s.Stopped++
		} else {
			s.Failed++
		}
		return
	}
	switch {
	case res.Where.Cached():
		s.Cached++
		s.SavedCPU += res.CPU
	case res.Where == executor.Remote:
		s.Remote++
	default:
		s.Local++
	}
	if d > s.SlowestIn {
		s.Slowest, s.SlowestIn = a.ID, d
	}
}

// Line renders the summary as one line.
func (s *Summary) Line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("thindist: %d jobs, %d failed, %d cached, %d remote, %d local",
		s.Jobs, s.Failed, s.Cached, s.Remote, s.Local)
	if s.Stopped > 0 {
		line += fmt.Sprintf(", %d stopped", s.Stopped)
	}
	// A failure or an interrupt stops the run before every job started.
	if n := s.Jobs - s.Failed - s.Stopped - s.Cached - s.Remote - s.Local; n > 0 {
		line += fmt.Sprintf(", %d not started", n)
	}
	line += fmt.Sprintf(" in %s", roundDur(time.Since(s.start)))
	if s.Slowest != "" {
		line += fmt.Sprintf("; slowest %s (%s)", s.Slowest, roundDur(s.SlowestIn))
	}
	return line
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
