package report

import (
	"fmt"
	"sort"
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

// Detail attaches detail to the last phase named name, if any, after the
// details already attached ("2 on workers, 40ms starting 1 fork server").
func (t *Timeline) Detail(name, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.phases) - 1; i >= 0; i-- {
		if p := &t.phases[i]; p.Name == name {
			if p.Detail != "" {
				detail = p.Detail + ", " + detail
			}
			p.Detail = detail
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

// describe says where the run's time went, as the summary line shows it:
// the phases within the run's wall time, in order, and "other" for the
// time none of them covers when it is a noticeable part ("thin link 210ms,
// backends 1.9s, final link 200ms, other 90ms"); then, apart, the work
// that preceded the run ("lld's 400ms", for a DTLTO distributor). Either
// may be "".
func (t *Timeline) describe() (within, before string) {
	end := t.now()
	var parts, pre []string
	var spans []Phase
	for _, p := range t.Phases() {
		d := Round(p.End.Sub(p.Start))
		if !p.End.After(t.start) {
			pre = append(pre, fmt.Sprintf("%s's %s", p.Name, d))
			continue
		}
		part := fmt.Sprintf("%s %s", p.Name, d)
		if p.Detail != "" {
			part += " including " + p.Detail
		}
		parts = append(parts, part)
		spans = append(spans, p)
	}
	if other := end.Sub(t.start) - covered(spans, t.start, end); len(parts) > 0 && other >= otherMin && other*10 >= end.Sub(t.start) {
		parts = append(parts, fmt.Sprintf("other %s", Round(other)))
	}
	return strings.Join(parts, ", "), strings.Join(pre, ", ")
}

// otherMin is the least uncovered time the summary calls "other" (with at
// least a tenth of the run): less is the rounding of the phases' own ends.
const otherMin = 20 * time.Millisecond

// covered is how much of [from, to] the phases cover, overlaps counted
// once.
func covered(ps []Phase, from, to time.Time) time.Duration {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Start.Before(ps[j].Start) })
	var sum time.Duration
	at := from
	for _, p := range ps {
		s, e := p.Start, p.End
		if s.Before(at) {
			s = at
		}
		if e.After(to) {
			e = to
		}
		if e.After(s) {
			sum += e.Sub(s)
			at = e
		}
	}
	return sum
}
