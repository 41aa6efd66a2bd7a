package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/thindist/thindist/internal/atomicfile"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/record"
	"github.com/thindist/thindist/internal/runreport"
)

const reportIntro = `Usage:
  thindist report [flags] [last|last~N|ID|FILE]
  thindist report --list

Shows the record of a run: by default the last one in the cache directory;
last~1 is the one before, ID a run's ID as --list prints it (or its unique
beginning), FILE a record file. Every run of thindist keeps a record unless
--no-record: its command line, output, phases, and for every module where it
ran, when, its CPU time and peak memory, the bytes it uploaded to and
downloaded from a remote service, its cache key, and for a module that was
compiled why it missed the cache (what differs from the module's last record:
an import's content, a flag, the compiler).

With --html FILE it writes one self-contained HTML page (nothing fetched, so it
opens from a file, offline): a timeline with a lane per local slot and per
remote action in flight, coloured by where each module ran, the critical path,
the phases, and a table of the modules sortable by time, CPU, size and bytes
uploaded and downloaded.

`

type reportFlags struct {
	html       string
	json, list bool
}

func newReportFlags(cfg *config.Config, rf *reportFlags) *config.FlagSet {
	fs := config.NewFlagSet("thindist report")
	fs.String(&rf.html, "html", "Report", "FILE", "", "write the run as a self-contained HTML page to FILE")
	fs.Bool(&rf.json, "json", "Report", false, "print the record as JSON")
	fs.Bool(&rf.list, "list", "Report", false, "list the kept records")
	cfg.Register(fs)
	return fs
}

func reportUsage(w io.Writer) {
	io.WriteString(w, reportIntro)
	var cfg config.Config
	var rf reportFlags
	newReportFlags(&cfg, &rf).PrintDefaults(w)
}

// reportCmd runs `thindist report`.
func reportCmd(args []string, env pipeline.Env, stdout io.Writer) int {
	var cfg config.Config
	var rf reportFlags
	fs := newReportFlags(&cfg, &rf)
	if code := parseFlags("thindist report", fs, &cfg, args, env, reportUsage); code >= 0 {
		return code
	}
	store := record.Open(pipeline.CacheDir(&cfg, env))
	if rf.list {
		if err := runreport.List(stdout, store); err != nil {
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
	which := "last"
	if len(rest) == 1 {
		which = rest[0]
	}
	run, err := store.Load(which)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist report: %v\n", err)
		return 1
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
	runreport.WriteText(stdout, run)
	return 0
}

// writeHTML writes run's page to path, whole or not at all.
func writeHTML(path string, run *record.Run) error {
	var b bytes.Buffer
	if err := runreport.WriteHTML(&b, run); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
