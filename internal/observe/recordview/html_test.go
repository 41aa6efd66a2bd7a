package recordview

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
)

// TestHTMLPage: the page draws each way a module ran in its own colour,
// with a legend entry for each (a worker's too); marks the critical path
// on the timeline and says in a line what it is, not a list of its
// names; starts its time axis at 0, also when lld worked before thindist
// started; and says what bold rows are.
func TestHTMLPage(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	run := &record.Run{Schema: record.Schema, ID: "20260101-120000.000-1", Dir: "/src", Output: "app",
		Start: start, End: start.Add(2 * time.Second), Jobs: 1,
		Phases: []record.Phase{{Name: "lld", Start: start.Add(-542 * time.Millisecond), End: start},
			{Name: "backends", Start: start, End: start.Add(2 * time.Second)}}}
	// One lane, back to back: forked, exec'd, worker, 40 more on a worker.
	end := int64(0)
	add := func(name string, a record.Action) {
		a.Module, a.Where, a.Begin, a.End = name, record.WhereLocal, end, end+30_000
		end = a.End
		run.Actions = append(run.Actions, a)
	}
	add("forked.o", record.Action{Forked: true})
	add("execd.o", record.Action{})
	for i := range 40 {
		add(fmt.Sprintf("w%02d.o", i), record.Action{Worker: true})
	}
	var b strings.Builder
	if err := WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	fill := func(module string) string {
		t.Helper()
		m := regexp.MustCompile(`data-module="` + regexp.QuoteMeta(module) + `"[^>]* fill="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no bar for %s", module)
		}
		return m[1]
	}
	colours := map[string]string{"forked": fill("forked.o"), "exec'd": fill("execd.o"), "worker": fill("w00.o")}
	if colours["worker"] == colours["exec'd"] || colours["worker"] == colours["forked"] || colours["forked"] == colours["exec'd"] {
		t.Errorf("bars share a colour: %v", colours)
	}
	legend := page[strings.Index(page, `<div class="legend">`):]
	legend = legend[:strings.Index(legend, "</div>")]
	for how, c := range colours {
		if !strings.Contains(legend, `background:`+c+`"></i>local, `+strings.ReplaceAll(how, "'", "&#39;")+`<`) {
			t.Errorf("the legend has no entry %q in %s: %s", "local, "+how, c, legend)
		}
	}
	if !strings.Contains(legend, "bold in the table") {
		t.Errorf("the legend does not say what bold rows are: %s", legend)
	}
	// The critical path: all 42 marked on the timeline, counted in a line.
	if n := strings.Count(page, `class="bar crit"`); n != 42 {
		t.Errorf("%d bars marked critical, want 42", n)
	}
	if !strings.Contains(page, `id="critline"`) {
		t.Error("the critical path is not drawn along its lane")
	}
	crit := regexp.MustCompile(`<p id="critical">([^<]*)</p>`).FindStringSubmatch(page)
	if crit == nil || !strings.Contains(crit[1], "42 modules") || strings.Contains(crit[1], "w01.o") || len(crit[1]) > 200 {
		t.Errorf("the critical path's line: %q, want a count, not the names", crit)
	}
	if strings.Contains(page, "→") {
		t.Error("the page lists the critical path's names")
	}
	// The axis: 0 at the left (lld's start), never negative; the bars'
	// times on the same axis.
	ticks := regexp.MustCompile(`text-anchor="middle">([^<]*)<`).FindAllStringSubmatch(page, -1)
	if len(ticks) == 0 || ticks[0][1] != "0s" {
		t.Errorf("the axis starts at %v, want 0s", ticks)
	}
	for _, tk := range ticks {
		if strings.HasPrefix(tk[1], "-") {
			t.Errorf("a tick at %s", tk[1])
		}
	}
	if !strings.Contains(page, "forked.o: local, forked, 30ms (queued at 542ms, started 542ms, ended 572ms") {
		t.Errorf("the first bar's times are not on the axis's scale:\n%s", page)
	}
}
