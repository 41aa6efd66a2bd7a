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
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/sched/schedule"
)

// Tee returns an observer that tells each of obs in turn.
func Tee(obs ...schedule.Observer) schedule.Observer { return tee(obs) }

type tee []schedule.Observer

func (t tee) Planned(n int, est *schedule.Estimates) {
	for _, o := range t {
		o.Planned(n, est)
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

// IsTerminal reports whether f is a terminal: it has a terminal's
// attributes (isatty(3)). Being a character device is not enough: /dev/null
// is one, and a build that sends thindist's output there must not pay for a
// live progress line nobody sees.
func IsTerminal(f *os.File) bool {
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	conn.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		tty = err == nil
	})
	return tty
}

// Console serialises writes to stderr and keeps a live progress line, when
// there is one, below everything else printed.
type Console struct {
	// Width returns the terminal's width in columns, which a progress
	// line must not exceed (a wrapped line is not cleared by "\r").
	Width func() int

	mu      sync.Mutex
	w       io.Writer
	live    bool   // a progress line is drawn
	line    string // its text
	enabled bool   // progress lines are wanted (a terminal)
	// turn, when the terminal is shared (ShareTerminal), says whether
	// this process's line is the one drawn.
	turn *terminalTurn
}

// ShareTerminal makes c take turns at the progress line with the other
// thindist processes writing to the same terminal, tty (what c's writer
// writes to in the end), by a lock file in dir (the runtime directory):
// one draws its line, the others draw none (their messages and summary
// lines still print, above the line) until it ends and one takes the turn
// over, so two links never overwrite each other's line. Call the function
// it returns once c draws no more.
func (c *Console) ShareTerminal(dir string, tty *os.File) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled || c.turn != nil {
		return func() {}
	}
	c.turn = newTerminalTurn(dir, tty)
	if c.turn == nil {
		return func() {}
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.clearLocked()
		c.enabled = false
		c.turn.release()
	}
}

// drawing reports whether c may draw its line; c.mu is held.
func (c *Console) drawing() bool { return c.enabled && (c.turn == nil || c.turn.take()) }

// NewConsole writes to w; progress lines are drawn only if live is true.
func NewConsole(w io.Writer, live bool) *Console {
	return &Console{w: w, enabled: live, Width: stderrWidth}
}

// stderrWidth is the width of the terminal on standard error, or of
// $COLUMNS, else 80.
func stderrWidth() int {
	if ws, err := unix.IoctlGetWinsize(2, unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		return int(ws.Col)
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// Printf prints a message on lines of its own.
func (c *Console) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	if c.enabled && c.turn != nil && !c.turn.own {
		// Another process's line may stand where the cursor is: erased,
		// for its owner to draw again below this message.
		io.WriteString(c.w, "\r\x1b[K")
	}
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
	if !c.drawing() {
		return
	}
	c.clearLocked()
	c.redrawLocked()
}

// ClearLine removes the progress line for good: none is drawn afterwards.
func (c *Console) ClearLine() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.line = ""
	c.enabled = false
	if c.turn != nil {
		c.turn.release()
	}
}

func (c *Console) clearLocked() {
	if c.live {
		io.WriteString(c.w, "\r\x1b[K")
		c.live = false
	}
}

func (c *Console) redrawLocked() {
	if c.line != "" && c.drawing() {
		io.WriteString(c.w, c.line)
		c.live = true
	}
}

// Summary counts what happened, for the line printed at the end.
type Summary struct {
	tl *Timeline
	// Output is the link's output, which the line names ("" names none).
	// Set it before the run or once it is over.
	Output string

	mu        sync.Mutex
	planned   bool
	Jobs      int
	Failed    int
	Stopped   int // interrupted while running (context cancelled), not failed
	Cached    int
	Remote    int
	Local     int
	Raced     int // ran on both sides at once (executor.Race)
	RacedHere int // ... and this machine's run won
	SavedCPU  time.Duration
	Slowest   string
	SlowestIn time.Duration
}

// NewSummary counts a run whose clock and phases are tl.
func NewSummary(tl *Timeline) *Summary { return &Summary{tl: tl} }

// Timeline is the run's clock and phases.
func (s *Summary) Timeline() *Timeline { return s.tl }

func (s *Summary) Planned(n int, _ *schedule.Estimates) {
	s.mu.Lock()
	s.Jobs, s.planned = n, true
	s.mu.Unlock()
}

// Counted reports whether a run was counted, i.e. got as far as planning
// its actions (a run stopped by its configuration has nothing to sum up).
func (s *Summary) Counted() bool               { s.mu.Lock(); defer s.mu.Unlock(); return s.planned }
func (s *Summary) Started(*action.Action, int) {}
func (s *Summary) Finished(a *action.Action, _ int, res *executor.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			s.Stopped++
		} else {
			s.Failed++
		}
		return
	}
	if res.Race.Twice() {
		s.Raced++
		if res.Where == executor.Local {
			s.RacedHere++
		}
	}
	switch {
	case res.Where.Cached():
		s.Cached++
		s.SavedCPU += res.CPU
		return // not compiled: no candidate for the slowest
	case res.Where == executor.Remote:
		s.Remote++
	default:
		s.Local++
	}
	// The executor's own time: not the wait for a slot, nor a fork
	// server's start-up, which the first job of a compiler would otherwise
	// be charged with.
	if res.Wall > s.SlowestIn {
		s.Slowest, s.SlowestIn = a.ID, res.Wall
	}
}

// Line renders the summary as one line: the output, the counts, the run's
// wall time and where it went, and the slowest module compiled.
func (s *Summary) Line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := "thindist: "
	if s.Output != "" {
		line += s.Output + ": "
	}
	line += fmt.Sprintf("%d jobs, %d failed, %d cached, %d remote, %d local",
		s.Jobs, s.Failed, s.Cached, s.Remote, s.Local)
	if s.Raced > 0 {
		line += fmt.Sprintf(" (%d raced, %d won here)", s.Raced, s.RacedHere)
	}
	if s.Stopped > 0 {
		line += fmt.Sprintf(", %d stopped", s.Stopped)
	}
	// A failure or an interrupt stops the run before every job started.
	if n := s.Jobs - s.Failed - s.Stopped - s.Cached - s.Remote - s.Local; n > 0 {
		line += fmt.Sprintf(", %d not started", n)
	}
	line += fmt.Sprintf(" in %s", Round(s.tl.Elapsed()))
	within, before := s.tl.describe()
	if within != "" {
		line += " (" + within + ")"
	}
	if before != "" {
		line += ", after " + before // not part of the time above
	}
	if s.Slowest != "" {
		line += fmt.Sprintf("; slowest %s (%s)", s.Slowest, Round(s.SlowestIn))
	}
	return line
}

// Round rounds a duration for display: to 1ms below a second, 10ms below
// ten, 100ms above.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
