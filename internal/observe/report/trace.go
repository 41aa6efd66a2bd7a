package report

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sched/schedule"
	"github.com/thindist/thindist/internal/sys/atomicfile"
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
	est    *schedule.Estimates // the modules' sizes, set by Planned
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

func (t *Trace) Planned(_ int, est *schedule.Estimates) {
	t.mu.Lock()
	t.est = est
	t.mu.Unlock()
}
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
	args := map[string]any{"module": a.ID, "output": a.Outputs[0].Path, "bytes": t.est.Weight(a)}
	cat := "failed"
	if res != nil {
		cat = res.Where.String()
		args["where"] = cat
		args["cpu_ms"] = res.CPU.Milliseconds()
		args["status"] = res.Status()
		if res.By == proc.ByForkServer {
			args["forked"] = true
		}
		if res.Race.Twice() {
			// Run on both sides at once (executor.Race): the winner.
			args["raced"] = "won by " + cat
		}
		switch res.Hedge {
		// Run on two workers at once (executor.Hedge).
		case executor.FirstWon:
			args["hedged"] = "won by the first execution"
		case executor.SecondWon:
			args["hedged"] = "won by the second execution"
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
				Name: st.Kind.String(), Cat: cat, Ph: "X", Pid: 1, Tid: slot,
				Ts: us(st.Start.Sub(t.start)), Dur: us(st.Took()), Args: map[string]any{"module": a.ID},
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
	meta := t.meta
	t.mu.Unlock()
	data, err := encodeTrace(events, meta)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// encodeTrace renders the trace file. It is written after the last
// backend, while the linker waits, so it is rendered by hand rather than
// through encoding/json's reflection, many times slower on a large link's
// events. The result is what json.Marshal gives for
// {"traceEvents": events, "displayTimeUnit": "ms", "otherData": meta}.
func encodeTrace(events []traceEvent, meta map[string]any) ([]byte, error) {
	b := make([]byte, 0, 64+200*len(events))
	b = append(b, `{"displayTimeUnit":"ms",`...)
	if meta != nil {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		b = append(b, `"otherData":`...)
		b = append(b, m...)
		b = append(b, ',')
	}
	b = append(b, `"traceEvents":[`...)
	var keys []string
	for i, e := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, e.Name)
		if e.Cat != "" {
			b = append(b, `,"cat":`...)
			b = appendJSONString(b, e.Cat)
		}
		b = append(b, `,"ph":`...)
		b = appendJSONString(b, e.Ph)
		b = append(b, `,"ts":`...)
		b = appendJSONFloat(b, e.Ts)
		if e.Dur != 0 {
			b = append(b, `,"dur":`...)
			b = appendJSONFloat(b, e.Dur)
		}
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(e.Pid), 10)
		b = append(b, `,"tid":`...)
		b = strconv.AppendInt(b, int64(e.Tid), 10)
		if len(e.Args) > 0 {
			b = append(b, `,"args":{`...)
			keys = keys[:0]
			for k := range e.Args {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for j, k := range keys {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, k)
				b = append(b, ':')
				var err error
				if b, err = appendJSONValue(b, e.Args[k]); err != nil {
					return nil, err
				}
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendJSONString appends s as a JSON string: plain printable ASCII as it
// is, anything else the way encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) || math.IsInf(f, 0) || math.IsNaN(f) {
		q, _ := json.Marshal(f) // the exponent form (a duration is never NaN or infinite)
		return append(b, q...)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// appendJSONValue appends an argument's value.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	}
	q, err := json.Marshal(v)
	return append(b, q...), err
}
