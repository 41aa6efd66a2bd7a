package recordview

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/observe/record"
)

// WriteHTML writes run as one self-contained HTML page: its styles and
// script are inline and it loads nothing, so it opens from a file, offline,
// and can be attached to a bug report. The timeline and the table are
// rendered here, so the page shows everything without its script, which
// only sorts the table.
func WriteHTML(w io.Writer, run *record.Run) error {
	return page().Execute(w, pageData(run))
}

const (
	laneHeight = 18
	laneGap    = 4
	labelWidth = 110
	plotWidth  = 1100
)

type pageView struct {
	Run     *record.Run
	Counts  Counts
	Wall    string
	Started string
	Command commandView
	Width   int
	Height  int
	Axis    []tick
	Phases  []phaseView
	Lanes   []laneView
	Bars    []barView
	Rows    []rowView
	// Critical says what the critical path is, in a line: its modules
	// are marked on the timeline and in the table, not listed.
	Critical string
	// CritLine underlines the critical path's stretch of its lane.
	CritLine *critLine
	Legend   []legendView
	// The run's bytes to and from the remote service.
	BytesUp, BytesDown string
	Entry              string      // the entry point, for people
	Linker             commandView // its command line, for lld's distributor
}

type tick struct {
	X     float64
	Label string
}

type phaseView struct {
	Name, Dur, Title string
	X, W             float64
	Color            string
}

type laneView struct {
	Label string
	Y     int
}

type barView struct {
	X, W, Y  float64
	Color    string
	Critical bool
	Title    string
	Module   string
	Label    string // the module's name when it fits in the bar, else ""
}

// commandView is a command line for the page: whole when short, else its
// beginning, with the whole behind a <details> that opens on a click.
type commandView struct {
	ID, Text, Head string
	Args           int
	Long           bool
}

// longCommand is the length above which a command line is folded: a
// linker's can be hundreds of lines, and would push the timeline off the
// first screen.
const longCommand = 300

func commandOf(id string, argv []string) commandView {
	c := commandView{ID: id, Text: strings.Join(argv, " "), Args: len(argv)}
	if len(c.Text) > longCommand {
		c.Long, c.Head = true, c.Text[:longCommand/2]+"…"
	}
	return c
}

// labelFits returns s if it fits in a bar w pixels wide at the page's
// 11px font (about 6.5px a character, with a margin), else "".
func labelFits(s string, w float64) string {
	if float64(len(s))*6.5+6 > w {
		return ""
	}
	return s
}

type rowView struct {
	Module, Where, Miss, Error      string
	Time, CPU, RSS, Size, Obj, Wait string
	Up, Down                        string
	TimeV, CPUV, RSSV, SizeV, WaitV int64
	UpV, DownV                      int64
	Critical                        bool
}

type legendView struct{ Name, Color string }

type critLine struct{ X1, X2, Y float64 }

var colors = map[string]string{
	record.WhereLocalCache:  "#2e9d4a",
	record.WhereRemoteCache: "#7fc97f",
	record.WhereRemote:      "#3b6fd4",
	record.WhereLocal:       "#e08a1e",
	record.WhereFailed:      "#d62728",
	record.WhereStopped:     "#999999",
}

// A local compile's colour says how it ran: forked from a fork server
// (colors[WhereLocal]), exec'd, or in a thindist-worker.
const (
	execColor   = "#b8621a"
	workerColor = "#8e44ad"
)

func pageData(run *record.Run) *pageView {
	v := &pageView{Run: run, Counts: Count(run), Wall: round(run.Wall()).String(),
		Started: run.Start.Local().Format("2006-01-02 15:04:05 MST"), Command: commandOf("command", run.Args),
		BytesUp: Bytes(run.BytesUp), BytesDown: Bytes(run.BytesDown), Entry: entryName(run.Entry),
		Linker: commandOf("linker", run.Linker)}
	// The time axis spans the run and every phase, from 0 at the first:
	// the linker's work before thindist started lies before the run's
	// start, which the actions' times count from.
	t0, t1 := run.Start, run.End
	for _, p := range run.Phases {
		if p.Start.Before(t0) {
			t0 = p.Start
		}
		if p.End.After(t1) {
			t1 = p.End
		}
	}
	for i := range run.Actions { // and every bar, whatever its clock said
		a := &run.Actions[i]
		if b := run.Start.Add(time.Duration(a.Begin) * time.Microsecond); b.Before(t0) {
			t0 = b
		}
		if e := run.Start.Add(time.Duration(a.End) * time.Microsecond); e.After(t1) {
			t1 = e
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	x := func(t time.Time) float64 { return labelWidth + float64(t.Sub(t0))/float64(span)*plotWidth }
	at := func(us int64) time.Time { return run.Start.Add(time.Duration(us) * time.Microsecond) }
	// onAxis is an action's time (µs since the run's start) as the axis
	// reads it.
	onAxis := func(n int64) string { return round(at(n).Sub(t0)).String() }
	v.Width = labelWidth + plotWidth + 40 // room for the last tick's label

	phaseColors := []string{"#c7b8e8", "#f2d49b", "#a8d5e2", "#e6b0b0", "#c9e2a8"}
	for i, p := range run.Phases {
		title := p.Name + ": " + round(p.End.Sub(p.Start)).String()
		if p.Detail != "" {
			title += " including " + p.Detail
		}
		v.Phases = append(v.Phases, phaseView{Name: p.Name, Dur: round(p.End.Sub(p.Start)).String(), Title: title,
			X: x(p.Start), W: max(x(p.End)-x(p.Start), 1), Color: phaseColors[i%len(phaseColors)]})
	}

	lanes := Lanes(run)
	crit := map[int]bool{}
	path := CriticalPath(run, lanes)
	var critTime int64
	for _, i := range path {
		crit[i] = true
		critTime += run.Actions[i].End - run.Actions[i].Begin
	}
	if len(path) > 0 {
		v.Critical = fmt.Sprintf("%d %s back to back on one lane, %s, the last of them ending the backends: outlined in black on the timeline, in bold in the table",
			len(path), plural(len(path), "module", "modules"), us(critTime))
	}
	nLocal, nRemote := 0, 0
	top := 40
	for l, ln := range lanes {
		y := top + l*(laneHeight+laneGap)
		label := ""
		if ln.Remote {
			label = fmt.Sprintf("remote %d", nRemote)
			nRemote++
		} else {
			label = fmt.Sprintf("local %d", nLocal)
			nLocal++
		}
		v.Lanes = append(v.Lanes, laneView{Label: label, Y: y})
		for _, i := range ln.Actions {
			a := &run.Actions[i]
			title := fmt.Sprintf("%s: %s, %s (queued at %s, started %s, ended %s; CPU %s%s)", a.Module, WhereText(a),
				round(a.Duration()), onAxis(a.Queued), onAxis(a.Begin), onAxis(a.End), us(a.CPU), Transfer(a))
			if crit[i] {
				title += "\non the critical path"
			}
			if len(a.Miss) > 0 {
				title += "\nmissed: " + strings.Join(a.Miss, "; ")
			}
			w := max(x(at(a.End))-x(at(a.Begin)), 1)
			if crit[i] {
				if v.CritLine == nil {
					v.CritLine = &critLine{X1: x(at(a.Begin)), Y: float64(y + laneHeight + 1)}
				}
				v.CritLine.X2 = x(at(a.Begin)) + w
			}
			v.Bars = append(v.Bars, barView{X: x(at(a.Begin)), W: w, Y: float64(y),
				Color: colorOf(a), Critical: crit[i], Title: title, Module: a.Module, Label: labelFits(a.Module, w)})
		}
	}
	v.Height = top + len(lanes)*(laneHeight+laneGap) + 10
	for k := 0; k <= 10; k++ {
		t := t0.Add(span * time.Duration(k) / 10)
		v.Axis = append(v.Axis, tick{X: x(t), Label: round(t.Sub(t0)).String()})
	}
	for _, a := range []record.Action{{Where: record.WhereLocal, Forked: true}, {Where: record.WhereLocal},
		{Where: record.WhereLocal, Worker: true}, {Where: record.WhereLocalCache}, {Where: record.WhereRemoteCache},
		{Where: record.WhereRemote}, {Where: record.WhereFailed}, {Where: record.WhereStopped}} {
		v.Legend = append(v.Legend, legendView{Name: WhereText(&a), Color: colorOf(&a)})
	}

	for _, i := range sortedBy(run, func(*record.Action) bool { return true }) {
		a := &run.Actions[i]
		v.Rows = append(v.Rows, rowView{
			Module: a.Module, Where: WhereText(a), Miss: strings.Join(a.Miss, "; "), Error: firstLine(a.Error),
			Time: us(a.End - a.Begin), TimeV: a.End - a.Begin,
			CPU: us(a.CPU), CPUV: a.CPU,
			RSS: optBytes(a.MaxRSS), RSSV: a.MaxRSS,
			Size: Bytes(a.Size), SizeV: a.Size, Obj: optBytes(a.ObjectSize),
			Wait: us(a.Begin - a.Queued), WaitV: a.Begin - a.Queued,
			Up: optBytes(a.BytesUp), UpV: a.BytesUp, Down: optBytes(a.BytesDown), DownV: a.BytesDown,
			Critical: crit[i],
		})
	}
	return v
}

// colorOf is the colour of a's bar: where it ran, and for a local
// compile, how.
func colorOf(a *record.Action) string {
	if a.Where == record.WhereLocal {
		switch a.By() {
		case proc.ByWorker:
			return workerColor
		case proc.ByExec:
			return execColor
		}
	}
	return colors[a.Where]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func us(n int64) string { return round(time.Duration(n) * time.Microsecond).String() }

func optBytes(n int64) string {
	if n <= 0 {
		return ""
	}
	return Bytes(n)
}

// page is parsed when first used, not when thindist starts: every link
// starts a thindist process and few of them write a page.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Parse(pageText))
})

const pageText = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>thindist run {{.Run.ID}}: {{.Run.Name}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em}
table.meta td{padding:1px 10px 1px 0;vertical-align:top}
code,pre{font:12px ui-monospace,monospace}
pre{background:#f4f4f4;padding:.6em;overflow:auto;max-height:20em}
.legend span{display:inline-block;margin-right:1em}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
svg text{font:11px system-ui,sans-serif}
svg text.barlabel{fill:#fff;pointer-events:none}
details.cmd summary{cursor:pointer}
rect.crit{stroke:#000;stroke-width:2}
table.mods{border-collapse:collapse;margin-top:.5em}
table.mods th,table.mods td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}
table.mods th{cursor:pointer;background:#eee;user-select:none}
table.mods td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.crit td:first-child{font-weight:bold}
.fail{color:#d62728}
</style></head>
<body>
<h1>thindist run {{.Run.ID}}: {{.Run.Name}}</h1>
<table class="meta">
<tr><td>command</td><td>{{template "cmd" .Command}}</td></tr>
{{if .Linker.Text}}<tr><td>linker</td><td>{{template "cmd" .Linker}}</td></tr>{{end}}
<tr><td>directory</td><td><code>{{.Run.Dir}}</code></td></tr>
<tr><td>version</td><td>{{.Run.Version}} ({{.Entry}}), pid {{.Run.PID}}, started {{.Started}}, took {{.Wall}}</td></tr>
<tr><td>jobs</td><td>{{.Counts.Total}}: {{.Counts.Cached}} local cache, {{.Counts.RemoteCached}} remote cache, {{.Counts.Remote}} remote, {{.Counts.Local}} local ({{.Counts.Forked}} forked{{if .Counts.Worker}}, {{.Counts.Worker}} on a worker{{end}}), {{.Counts.Failed}} failed</td></tr>
{{if and .Counts.Worker .Run.WorkerServer}}<tr><td>workers</td><td>{{.Run.WorkerServer}}</td></tr>{{end}}
<tr><td>settings</td><td>--jobs={{.Run.Jobs}}{{if .Run.Remote}}, --remote={{.Run.Remote}} ({{.Run.RemoteJobs}} in flight; {{.BytesUp}} uploaded, {{.BytesDown}} downloaded{{if .Run.Invocation}}; invocation {{.Run.Invocation}}{{end}}){{end}}{{if not .Run.LocalCache}}, no local cache{{end}}</td></tr>
{{if .Run.Compression}}<tr><td>compress</td><td>{{.Run.Compression}}</td></tr>{{end}}
{{if .Run.Error}}<tr><td>result</td><td class="fail">{{.Run.Error}}</td></tr>{{end}}
</table>

<h2>Timeline</h2>
<div class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}<span><i style="background:#fff;outline:2px solid #000"></i>critical path (bold in the table)</span></div>
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}">
{{range .Axis}}<line x1="{{.X}}" x2="{{.X}}" y1="0" y2="{{$.Height}}" stroke="#eee"/><text x="{{.X}}" y="10" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Phases}}<g class="phase"><rect x="{{.X}}" y="16" width="{{.W}}" height="16" fill="{{.Color}}"><title>{{.Title}}</title></rect><text x="{{.X}}" y="28" dx="3">{{.Name}} {{.Dur}}</text></g>
{{end}}{{range .Lanes}}<text x="0" y="{{.Y}}" dy="13">{{.Label}}</text>
{{end}}{{range .Bars}}<rect class="bar{{if .Critical}} crit{{end}}" data-module="{{.Module}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="18" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{if .Label}}<text class="barlabel" x="{{.X}}" dx="3" y="{{.Y}}" dy="13">{{.Label}}</text>{{end}}
{{end}}{{with .CritLine}}<line id="critline" x1="{{.X1}}" x2="{{.X2}}" y1="{{.Y}}" y2="{{.Y}}" stroke="#000" stroke-width="2"><title>the critical path</title></line>{{end}}</svg>
{{if .Critical}}<p id="critical">Critical path: {{.Critical}}.</p>{{end}}

<h2>Modules</h2>
<p>Click a column to sort.{{if .Critical}} Modules in bold are on the critical path.{{end}}</p>
<table class="mods" id="modules">
<thead><tr><th>module</th><th>where</th><th data-num>time</th><th data-num>CPU</th><th data-num>peak RSS</th><th data-num>bitcode</th><th>object</th><th data-num>waited</th><th data-num>uploaded</th><th data-num>downloaded</th><th>why it missed the cache</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="module{{if .Critical}} crit{{end}}"><td>{{.Module}}</td><td>{{.Where}}</td><td class="n" data-v="{{.TimeV}}">{{.Time}}</td><td class="n" data-v="{{.CPUV}}">{{.CPU}}</td><td class="n" data-v="{{.RSSV}}">{{.RSS}}</td><td class="n" data-v="{{.SizeV}}">{{.Size}}</td><td class="n">{{.Obj}}</td><td class="n" data-v="{{.WaitV}}">{{.Wait}}</td><td class="n" data-v="{{.UpV}}">{{.Up}}</td><td class="n" data-v="{{.DownV}}">{{.Down}}</td><td>{{.Miss}}{{if .Error}}<span class="fail">{{.Error}}</span>{{end}}</td></tr>
{{end}}</tbody></table>

{{if .Run.Log}}<h2>Output</h2>
<pre id="log">{{.Run.Log}}</pre>{{end}}

<script>
(function(){
  var t=document.getElementById("modules"), body=t.tBodies[0], dir={};
  Array.prototype.forEach.call(t.tHead.rows[0].cells, function(th, col){
    th.addEventListener("click", function(){
      var num=th.hasAttribute("data-num"), rows=Array.prototype.slice.call(body.rows);
      dir[col]=!dir[col];
      rows.sort(function(a,b){
        var x=a.cells[col], y=b.cells[col], r;
        if(num){ r=(+x.getAttribute("data-v"))-(+y.getAttribute("data-v")); }
        else { r=x.textContent.localeCompare(y.textContent); }
        return dir[col] ? -r : r;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body></html>
{{define "cmd"}}{{if .Long}}<details class="cmd"><summary><code>{{.Head}}</code> ({{.Args}} arguments: click to show all)</summary><code id="{{.ID}}">{{.Text}}</code></details>{{else}}<code id="{{.ID}}">{{.Text}}</code>{{end}}{{end}}
`
