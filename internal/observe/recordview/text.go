package recordview

import (
	"fmt"
	"github.com/thindist/thindist/internal/observe/report"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/observe/record"
)

// Counts are how a run's actions ended.
type Counts struct {
	Total, Cached, RemoteCached, Remote, Local, Forked, Worker, Failed, Stopped int
	// CPU is the compile time of the actions compiled; Saved what the
	// cache hits saved.
	CPU, Saved time.Duration
}

// Count counts run's actions.
func Count(run *record.Run) Counts {
	var c Counts
	for i := range run.Actions {
		a := &run.Actions[i]
		c.Total++
		cpu := time.Duration(a.CPU) * time.Microsecond
		switch a.Where {
		case record.WhereLocalCache:
			c.Cached++
			c.Saved += cpu
		case record.WhereRemoteCache:
			c.RemoteCached++
			c.Saved += cpu
		case record.WhereRemote:
			c.Remote++
			c.CPU += cpu
		case record.WhereLocal:
			c.Local++
			c.CPU += cpu
			switch a.By() {
			case proc.ByForkServer:
				c.Forked++
			case proc.ByWorker:
				c.Worker++
			}
		case record.WhereFailed:
			c.Failed++
		case record.WhereStopped:
			c.Stopped++
		}
	}
	return c
}

// WriteText prints run's summary for a terminal: what it was, where the
// time went, the slowest modules, the critical path and why modules missed
// the cache.
func WriteText(w io.Writer, run *record.Run) {
	c := Count(run)
	fmt.Fprintf(w, "run %s: %s (%s), in %s\n", run.ID, run.Name(), entryName(run.Entry), run.Dir)
	fmt.Fprintf(w, "  command:  %s\n", strings.Join(run.Args, " "))
	if len(run.Linker) > 0 {
		fmt.Fprintf(w, "  linker:   %s\n", strings.Join(run.Linker, " "))
	}
	fmt.Fprintf(w, "  version:  %s, pid %d, started %s, took %s\n", run.Version, run.PID,
		run.Start.Local().Format("2006-01-02 15:04:05"), round(run.Wall()))
	if run.Error != "" {
		fmt.Fprintf(w, "  FAILED:   %s\n", firstLine(run.Error))
	}
	fmt.Fprintf(w, "  jobs:     %d: %d cached, %d remote cache, %d remote, %d local (%d forked", c.Total, c.Cached, c.RemoteCached, c.Remote, c.Local, c.Forked)
	if c.Worker > 0 {
		fmt.Fprintf(w, ", %d on a worker", c.Worker)
	}
	fmt.Fprintf(w, "), %d failed", c.Failed)
	if c.Stopped > 0 {
		fmt.Fprintf(w, ", %d stopped", c.Stopped)
	}
	fmt.Fprintln(w)
	if c.Worker > 0 && run.WorkerServer != "" {
		fmt.Fprintf(w, "  workers:  %s\n", run.WorkerServer)
	}
	fmt.Fprintf(w, "  CPU:      %s compiling, %s saved by the cache\n", round(c.CPU), round(c.Saved))
	settings := fmt.Sprintf("--jobs=%d", run.Jobs)
	if run.Remote != "" {
		settings += fmt.Sprintf(", --remote=%s (%d in flight; %s up, %s down", run.Remote, run.RemoteJobs,
			Bytes(run.BytesUp), Bytes(run.BytesDown))
		if run.Invocation != "" {
			settings += "; invocation " + run.Invocation
		}
		if run.FellBack > 0 {
			settings += fmt.Sprintf("; %d fell back to local", run.FellBack)
		}
		settings += toolchainText(run.Toolchain)
		settings += ")"
	}
	if !run.LocalCache {
		settings += ", no local cache"
	}
	if run.Ordered > 0 {
		settings += fmt.Sprintf(", %d of %d ordered by their recorded time", run.Ordered, c.Total)
	}
	fmt.Fprintf(w, "  settings: %s\n", settings)
	if run.Compression != "" {
		fmt.Fprintf(w, "  compress: %s\n", run.Compression)
	}
	if len(run.Phases) > 0 {
		var ps []string
		for _, p := range run.Phases {
			s := fmt.Sprintf("%s %s", p.Name, round(p.End.Sub(p.Start)))
			if !p.End.After(run.Start) {
				s += " before thindist started"
			}
			if p.Detail != "" {
				s += " including " + p.Detail
			}
			ps = append(ps, s)
		}
		fmt.Fprintf(w, "  phases:   %s\n", strings.Join(ps, ", "))
	}

	compiled := sortedBy(run, func(a *record.Action) bool { return a.Compiled() })
	if len(compiled) > 0 {
		fmt.Fprintf(w, "  slowest:\n")
		for _, i := range compiled[:min(5, len(compiled))] {
			a := &run.Actions[i]
			fmt.Fprintf(w, "    %-8s %s (%s, CPU %s, %s bitcode%s)\n", round(a.Duration()), a.Module,
				WhereText(a), round(time.Duration(a.CPU)*time.Microsecond), Bytes(a.Size), Transfer(a))
		}
	}
	if path := CriticalPath(run, Lanes(run)); len(path) > 0 {
		var names []string
		var sum time.Duration
		for _, i := range path {
			names = append(names, run.Actions[i].Module)
			sum += run.Actions[i].Duration()
		}
		if len(names) > 6 {
			names = append(names[:2], fmt.Sprintf("... %d more ...", len(names)-4), names[len(names)-2], names[len(names)-1])
		}
		fmt.Fprintf(w, "  critical: %s: %s\n", round(sum), strings.Join(names, " -> "))
	}
	writeMisses(w, run)
	writeNotWorker(w, run)
	for i := range run.Actions {
		if a := &run.Actions[i]; a.Error != "" {
			fmt.Fprintf(w, "  failed:   %s: %s\n", a.Module, firstLine(a.Error))
		}
	}
}

// writeNotWorker groups the modules compiled locally but not on a worker
// (when one was configured) by why not.
func writeNotWorker(w io.Writer, run *record.Run) {
	by := map[string][]string{}
	for _, a := range run.Actions {
		if a.Where == record.WhereLocal && a.NotWorker != "" {
			by[a.NotWorker] = append(by[a.NotWorker], a.Module)
		}
	}
	whys := slices.Sorted(maps.Keys(by))
	for _, why := range whys {
		ms := by[why]
		if len(ms) > 3 {
			ms = append(ms[:3], fmt.Sprintf("%d more", len(ms)-3))
		}
		fmt.Fprintf(w, "  no worker: %s: %s\n", why, strings.Join(ms, ", "))
	}
}

// writeMisses groups the compiled modules by why they missed.
func writeMisses(w io.Writer, run *record.Run) {
	by := map[string][]string{}
	var reasons []string
	for i := range run.Actions {
		a := &run.Actions[i]
		if len(a.Miss) == 0 {
			continue
		}
		r := strings.Join(a.Miss, "; ")
		if by[r] == nil {
			reasons = append(reasons, r)
		}
		by[r] = append(by[r], a.Module)
	}
	if len(reasons) == 0 {
		return
	}
	sort.SliceStable(reasons, func(i, j int) bool { return len(by[reasons[i]]) > len(by[reasons[j]]) })
	fmt.Fprintf(w, "  cache misses, by reason:\n")
	for _, r := range reasons {
		mods := by[r]
		list := strings.Join(mods[:min(4, len(mods))], ", ")
		if len(mods) > 4 {
			list += fmt.Sprintf(" and %d more", len(mods)-4)
		}
		fmt.Fprintf(w, "    %s: %s\n", r, list)
	}
}

// sortedBy returns the indices of the actions keep accepts, longest first.
func sortedBy(run *record.Run, keep func(*record.Action) bool) []int {
	var idx []int
	for i := range run.Actions {
		if keep(&run.Actions[i]) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(i, j int) bool { return run.Actions[idx[i]].Duration() > run.Actions[idx[j]].Duration() })
	return idx
}

// Transfer is ", 1.2 MiB up, 300 KiB down" for an action that moved bytes
// to or from the remote service, "" for one that moved none.
func Transfer(a *record.Action) string {
	if a.BytesUp == 0 && a.BytesDown == 0 {
		return ""
	}
	return fmt.Sprintf(", %s up, %s down", Bytes(a.BytesUp), Bytes(a.BytesDown))
}

// WhereText says where an action ran, for people.
func WhereText(a *record.Action) string {
	s := map[string]string{
		record.WhereLocalCache:  "local cache",
		record.WhereRemoteCache: "remote cache",
		record.WhereRemote:      "remote",
		record.WhereLocal:       "local",
		record.WhereFailed:      "failed",
		record.WhereStopped:     "stopped",
	}[a.Where]
	if a.Where == record.WhereLocal {
		switch a.By() {
		case proc.ByWorker:
			s += ", worker"
		case proc.ByForkServer:
			s += ", forked"
		default:
			s += ", exec'd"
		}
	}
	if a.Raced {
		s += ", won a race"
	}
	return s
}

func entryName(e string) string {
	switch e {
	case "dtlto":
		return "lld's DTLTO distributor"
	case "link":
		return "thindist link"
	case "plugin":
		return "the linker plugin"
	}
	return e
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// round is the summary line's rounding, so a report and the link's own
// summary show the same figures.
func round(d time.Duration) time.Duration { return report.Round(d) }

// Bytes renders a size for people.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// List prints one line per kept record, newest last.
func List(w io.Writer, store *record.Store) error {
	es, err := store.List()
	if err != nil {
		return err
	}
	if len(es) == 0 {
		fmt.Fprintf(w, "no run is recorded in %s\n", store.Dir)
		return nil
	}
	for _, e := range es {
		run, err := record.ReadFile(e.Path)
		if err != nil {
			fmt.Fprintf(w, "%-28s (unreadable: %v)\n", e.ID, err)
			continue
		}
		c := Count(run)
		status := "ok"
		if run.Error != "" {
			status = "FAILED"
		}
		fmt.Fprintf(w, "%-28s %-6s %8s %4d jobs %4d hits %4d compiled  %s\n", e.ID, status, round(run.Wall()),
			c.Total, c.Cached+c.RemoteCached, c.Local+c.Remote, run.Name())
	}
	return nil
}

// toolchainText is what shipping the compiler cost a run ("" when it did
// not ship it).
func toolchainText(tc *record.Toolchain) string {
	if tc == nil {
		return ""
	}
	s := fmt.Sprintf("; compiler shipped as inputs, %d files, %s", tc.Files, Bytes(tc.Bytes))
	if tc.Uploaded == 0 {
		return s + ", already in the CAS"
	}
	return s + fmt.Sprintf(", %s uploaded in %s", Bytes(tc.Uploaded), round(tc.Took))
}
