package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/recordview"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/sys/atomicfile"
)

const reportIntro = `Usage:
  thindist report [last|last~N|ID|FILE] [--html FILE|--json]
  thindist report --list [--json]

Shows the record of a run: by default the last one that linked here (whose
output or working directory is the current directory or below it; else the
newest, with a note); last is the newest of all, last~1 the one before, ID a
run's ID as --list prints it (or its unique beginning), FILE a record file. Every run of thindist keeps a record unless
--no-record: its command line, output, phases, and for every module where it
ran, when, its CPU time and peak memory, the bytes it uploaded to and
downloaded from a remote service, its cache key, and for a module that was
compiled why it missed the cache (what differs from the module's last record:
an import's content, a flag, the compiler).

With --html FILE it writes one self-contained HTML page (nothing fetched, so it
opens from a file, offline): a timeline with a lane per local slot and per
remote action in flight, coloured by where each module ran, the critical path,
the phases, and a table of the modules sortable by time, CPU, size and bytes
uploaded and downloaded. --html - (or --html last on the line) writes the page
to stdout. Flags may come before or after the run.
`

type reportFlags struct {
	html       string
	json, list bool
}

func newReportFlags(cfg *config.Config, rf *reportFlags) *config.FlagSet {
	fs := config.NewFlagSet("thindist report")
	fs.String(&rf.html, "html", "Report", "FILE", "", "write the run as a self-contained HTML page to FILE (- for stdout)")
	fs.Bool(&rf.json, "json", "Report", false, "print the record as JSON (with --list, the list)")
	fs.Bool(&rf.list, "list", "Report", false, "list the kept records")
	for _, n := range []string{"html", "json", "list"} {
		fs.CommandOnly(n)
	}
	cfg.Register(fs)
	return fs
}

func reportUsage(w io.Writer) {
	var cfg config.Config
	var rf reportFlags
	helpOwnFlags(w, reportIntro, newReportFlags(&cfg, &rf))
}

// reportCmd runs `thindist report`.
func reportCmd(args []string, env pipeline.Env, stdout io.Writer) int {
	var cfg config.Config
	var rf reportFlags
	fs := newReportFlags(&cfg, &rf)
	if code := parseFlags("thindist report", fs, &cfg, htmlToStdout(args), env, reportUsage); code >= 0 {
		return code
	}
	store := record.Open(cfg.CacheRoot(env.Getenv))
	if rf.list {
		list := recordview.List
		if rf.json {
			list = listJSON
		}
		if err := list(stdout, store); err != nil {
			fmt.Fprintf(env.Stderr, "thindist report: %v\n", err)
			return 1
		}
		return 0
	}
	rest := fs.Args()
	if len(rest) > 1 {
		fmt.Fprintf(env.Stderr, "thindist report: one run at a time, not %d\n", len(rest))
		return 2
	}
	var run *record.Run
	var err error
	if len(rest) == 1 {
		run, err = store.Load(rest[0])
	} else {
		run, err = lastHere(store, env.Stderr)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist report: %v\n", err)
		return 1
	}
	if rf.html == "-" {
		if err := recordview.WriteHTML(stdout, run); err != nil {
			fmt.Fprintf(env.Stderr, "thindist report: %v\n", err)
			return 1
		}
		return 0
	}
	if rf.html != "" {
		if err := writeHTML(rf.html, run); err != nil {
			fmt.Fprintf(env.Stderr, "thindist report: writing %s: %v\n", rf.html, err)
			return 1
		}
		fmt.Fprintf(env.Stderr, "thindist report: wrote %s\n", rf.html)
		return 0
	}
	if rf.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(run); err != nil {
			fmt.Fprintf(env.Stderr, "thindist report: %v\n", err)
			return 1
		}
		return 0
	}
	recordview.WriteText(stdout, run)
	return 0
}

// lastHere reads the record of the last run that linked under the current
// directory (record.Store.LastUnder), else the newest, saying so on stderr.
func lastHere(store *record.Store, stderr io.Writer) (*record.Run, error) {
	here, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	run, found, err := store.LastUnder(here)
	if err == nil && !found {
		fmt.Fprintf(stderr, "thindist report: no recorded run linked under %s; showing the newest, %s (%s); 'thindist report --list' lists them\n",
			here, run.ID, run.Name())
	}
	return run, err
}

// htmlToStdout spells a bare --html (the last argument, or one followed by
// another flag) as --html=-: the page goes to stdout.
func htmlToStdout(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a != "--html" && a != "-html" {
			continue
		}
		if i+1 == len(out) || strings.HasPrefix(out[i+1], "-") && out[i+1] != "-" {
			out[i] = "--html=-"
		}
	}
	return out
}

// listed is one kept record as `report --list --json` prints it.
type listed struct {
	ID       string    `json:"id"`
	Path     string    `json:"path"`
	Output   string    `json:"output,omitempty"`
	Start    time.Time `json:"start"`
	WallMS   int64     `json:"wall_ms"`
	Error    string    `json:"error,omitempty"`
	Actions  int       `json:"actions"`
	Hits     int       `json:"cache_hits"`
	Compiled int       `json:"compiled"`
	// Unreadable says why the record could not be read (the rest is empty).
	Unreadable string `json:"unreadable,omitempty"`
}

// listJSON writes the kept records, oldest first, as a JSON array.
func listJSON(w io.Writer, store *record.Store) error {
	es, err := store.List()
	if err != nil {
		return err
	}
	out := []listed{}
	for _, e := range es {
		l := listed{ID: e.ID, Path: e.Path}
		if run, err := record.ReadFile(e.Path); err != nil {
			l.Unreadable = err.Error()
		} else {
			c := recordview.Count(run)
			l.Output, l.Start, l.WallMS, l.Error = run.Name(), run.Start, run.Wall().Milliseconds(), run.Error
			l.Actions, l.Hits, l.Compiled = c.Total, c.Cached+c.RemoteCached, c.Local+c.Remote
		}
		out = append(out, l)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeHTML writes run's page to path, whole or not at all.
func writeHTML(path string, run *record.Run) error {
	var b bytes.Buffer
	if err := recordview.WriteHTML(&b, run); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
