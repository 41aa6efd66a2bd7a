package report

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Phase is a named stretch of a run's wall time: the linker's work before
// thindist started, connecting to a remote service, the thin link, the
// backends, the final link.
type Phase struct {
	Name       string
	Start, End time.Time
	// Detail says more about the phase: "420ms starting 1 fork server".
	Detail string
}

// Timeline is a run's clock: when the run began and the phases it saw.
// Safe for concurrent use.
type Timeline struct {
	now   func() time.Time
	start time.Time

	mu     sync.Mutex
	phases []Phase
}

// NewTimeline starts a timeline at start, read with now (time.Now when nil;
// tests give a fake clock).
func NewTimeline(start time.Time, now func() time.Time) *Timeline {
	if now == nil {
		now = time.Now
	}
	return &Timeline{now: now, start: start}
}

// Start is when the run began.
func (t *Timeline) Start() time.Time { return t.start }

// Now reads the timeline's clock.
func (t *Timeline) Now() time.Time { return t.now() }

// Elapsed is the run's wall time so far.
func (t *Timeline) Elapsed() time.Duration { return t.now().Sub(t.start) }

// Begin starts phase name now; calling the function it returns ends it.
func (t *Timeline) Begin(name string) (end func()) {
	start := t.now()
	return func() { t.Add(name, start, t.now()) }
}

// Add records a phase that ran from start to end (before the run's start
// for work that preceded it, such as the linker's).
func (t *Timeline) Add(name string, start, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phases = append(t.phases, Phase{Name: name, Start: start, End: end})
}

// Detail attaches detail to the last phase named name, if any.
func (t *Timeline) Detail(name, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.phases) - 1; i >= 0; i-- {
		if t.phases[i].Name == name {
			t.phases[i].Detail = detail
			return
		}
	}
}

// Phases returns the phases recorded, in the order they ended.
func (t *Timeline) Phases() []Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Phase(nil), t.phases...)
}

// describe says where the time went: "lld 0.40s before, thin link 0.21s,
// backends 1.90s, final link 0.20s", or "" with no phases.
func (t *Timeline) describe() string {
	var parts []string
	for _, p := range t.Phases() {
		d := Round(p.End.Sub(p.Start))
		if !p.End.After(t.start) {
			parts = append(parts, fmt.Sprintf("%s %s before", p.Name, d))
			continue
		}
		part := fmt.Sprintf("%s %s", p.Name, d)
		if p.Detail != "" {
			part += " including " + p.Detail
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
