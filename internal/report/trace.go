package report

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/atomicfile"
	"github.com/thindist/thindist/internal/executor"
)

// Trace records one complete event per action, on the lane ("thread") of the
// slot that ran it, in the Chrome trace event format that Perfetto and
// chrome://tracing open.
type Trace struct {
	mu     sync.Mutex
	start  time.Time
	begun  map[*action.Action]time.Time
	events []traceEvent
	lanes  int
	meta   map[string]any
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"` // microseconds
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// NewTrace starts a trace now.
func NewTrace() *Trace { return &Trace{start: time.Now(), begun: map[*action.Action]time.Time{}} }

func (t *Trace) Planned(int) {}
func (t *Trace) Started(a *action.Action, slot int) {
	t.mu.Lock()
	t.begun[a] = time.Now()
	t.lanes = max(t.lanes, slot+1)
	t.mu.Unlock()
}
func (t *Trace) Finished(a *action.Action, slot int, res *executor.Result, err error) {
	end := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	begin := t.begun[a]
	delete(t.begun, a)
	args := map[string]any{"module": a.ID, "output": a.Outputs[0].Path, "bytes": a.Weight}
	cat := "failed"
	if res != nil {
		cat = res.Where.String()
		args["where"] = cat
		args["cpu_ms"] = res.CPU.Milliseconds()
		args["status"] = res.Status()
		if res.Forked {
			args["forked"] = true
		}
		if res.Raced {
			// Run on both sides at once (executor.Race): the winner.
			args["raced"] = "won by " + cat
		}
		if res.Hedged {
			// Run on two workers at once (executor.Hedge).
			args["hedged"] = "won by the first execution"
			if res.HedgeWon {
				args["hedged"] = "won by the second execution"
			}
		}
	}
	if err != nil {
		cat = "failed"
		args["error"] = err.Error()
	}
	t.events = append(t.events, traceEvent{
		Name: a.ID, Cat: cat, Ph: "X", Pid: 1, Tid: slot,
		Ts: us(begin.Sub(t.start)), Dur: us(end.Sub(begin)), Args: args,
	})
	if res != nil {
		// Nested under the action's span: the viewers stack events of
		// one thread that lie within each other.
		for _, st := range res.Steps {
			t.events = append(t.events, traceEvent{
				Name: st.Name, Cat: cat, Ph: "X", Pid: 1, Tid: slot,
				Ts: us(st.Start.Sub(t.start)), Dur: us(st.End.Sub(st.Start)), Args: map[string]any{"module": a.ID},
			})
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// SetMetadata sets what the trace says of the run as a whole (its command
// line, directory, output and messages): the trace file's "otherData",
// which Perfetto and chrome://tracing show as the trace's metadata.
func (t *Trace) SetMetadata(m map[string]any) {
	t.mu.Lock()
	t.meta = m
	t.mu.Unlock()
}

// TracePath expands a --trace file name: %p becomes the process ID, %t the
// time the run started, %% a percent sign; so that parallel links, each
// given the same --trace, never overwrite each other's traces.
func TracePath(pattern string, pid int, start time.Time) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) {
			b.WriteByte(pattern[i])
			continue
		}
		switch pattern[i+1] {
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		case 't':
			b.WriteString(start.UTC().Format("20060102-150405.000"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(pattern[i : i+2])
		}
		i++
	}
	return b.String()
}

// Write saves the trace to path, atomically.
func (t *Trace) Write(path string) error {
	t.mu.Lock()
	events := []traceEvent{{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "thindist"}}}
	for i := 0; i < t.lanes; i++ {
		events = append(events, traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: i,
			Args: map[string]any{"name": fmt.Sprintf("slot %d", i)}})
	}
	events = append(events, t.events...)
	file := map[string]any{"traceEvents": events, "displayTimeUnit": "ms"}
	if t.meta != nil {
		file["otherData"] = t.meta
	}
	t.mu.Unlock()
	data, err := json.Marshal(file)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}
