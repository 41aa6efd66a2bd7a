package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/redact"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/sys/version"
)

// Session is one run of an entry point (lld's DTLTO distributor, `thindist
// link`, the linker plugin) from its start to its end. It holds the run's
// summary line and its record, so that every entry point reports and
// records its run the same way.
type Session struct {
	// Env is the run's environment, as RunWith takes it: it carries the
	// record, and what the run prints on Env.Stderr or reports through
	// Env.Diag goes into the record's log too.
	Env     Env
	rec     *record.Recorder
	summary *report.Summary
	// bg counts what the run still writes after Run (Options.Background).
	bg sync.WaitGroup
}

// NewSession begins the run of entry point entry ("dtlto", "link" or
// "plugin", record.Run.Entry), started at start with the command line args
// (thindist's own, or for the plugin the linker's), in env.
func NewSession(entry string, args []string, env Env, start time.Time) *Session {
	dir, _ := os.Getwd()
	rec := record.New(record.Run{Version: version.Line(), Entry: entry, Args: args, Dir: dir, Start: start})
	env.Record = rec
	env.Stderr = io.MultiWriter(env.Stderr, rec.LogWriter())
	if diag := env.Diag; diag != nil {
		env.Diag = func(d Diagnostic) {
			kind := "error"
			if d.Warning {
				kind = "warning"
			}
			// A writer per message: diagnostics arrive from several
			// goroutines, each a whole line.
			fmt.Fprintf(rec.LogWriter(), "thindist: %s: %s\n", kind, d.Msg)
			diag(d)
		}
	}
	return &Session{Env: env, rec: rec, summary: report.NewSummary(report.NewTimeline(start, nil))}
}

// Timeline is the run's clock and phases (those before the backends, such
// as the linker's work before thindist started, are added by the caller).
func (s *Session) Timeline() *report.Timeline { return s.summary.Timeline() }

// LinkerBegan records that the linker that runs thindist (lld running its
// DTLTO distributor, or loading the plugin) started at began, working
// before thindist did: a phase of the run. args is its command line, for
// the record, when thindist's own is not the linker's (nil otherwise).
func (s *Session) LinkerBegan(began time.Time, args []string) {
	if start := s.Timeline().Start(); began.Before(start) {
		s.Timeline().Add("lld", began, start)
	}
	if len(args) > 0 {
		s.rec.Update(func(run *record.Run) { run.Linker = args })
	}
}

// SetOutput names the file the run links, for the summary line, the trace
// and the record. Call it before Run, so that the trace, written when the
// backends end, names it too.
func (s *Session) SetOutput(path string) {
	s.summary.Output = path
	s.rec.Update(func(run *record.Run) { run.Output = path })
}

// ReadAhead begins reading what the run's history needs from the records
// (record.Recorder.ReadAhead), unless cfg turns records off: call it as
// soon as cfg is known, before the job file is read.
func (s *Session) ReadAhead(cfg *config.Config) {
	if !cfg.NoRecord {
		s.rec.ReadAhead(record.Open(cfg.CacheRoot(s.Env.Getenv)))
	}
}

// Run executes actions as cfg says (RunWith), counted in the run's summary.
func (s *Session) Run(ctx context.Context, cfg *config.Config, actions []*action.Action) error {
	return RunWith(ctx, cfg, s.Env, actions, Options{Summary: s.summary, Background: &s.bg})
}

// Finish ends the run with its error: it prints the summary line (unless
// cfg.Quiet, or nothing was planned), then finishes the record with the
// timeline's phases and keeps it in the cache directory (unless
// --no-record). A record that cannot be kept costs a warning, never the
// link.
func (s *Session) Finish(cfg *config.Config, runErr error) {
	defer s.bg.Wait() // the trace, written meanwhile
	if s.summary.Counted() && !cfg.Quiet {
		if s.Env.Terminal {
			// Another link's progress line may stand there
			// (report.Console.ShareTerminal): the summary replaces it.
			fmt.Fprint(s.Env.Stderr, "\r\x1b[K")
		}
		fmt.Fprintln(s.Env.Stderr, s.summary.Line())
	}
	if cfg.NoRecord {
		return
	}
	for _, p := range s.Timeline().Phases() {
		s.rec.Phase(record.Phase{Name: p.Name, Start: p.Start, End: p.End, Detail: p.Detail})
	}
	run := s.rec.Finish(time.Now(), runErr)
	store := record.Open(cfg.CacheRoot(s.Env.Getenv))
	store.Secrets = redact.NewValues(cfg.Remote.Secrets()...)
	if err := store.Keep(run); err != nil {
		msg := fmt.Sprintf("keeping the run's record: %v (--no-record turns records off)", err)
		if s.Env.Diag != nil {
			s.Env.Diag(Diagnostic{Warning: true, Msg: msg})
			return
		}
		fmt.Fprintf(s.Env.Stderr, "thindist: warning: %s\n", msg)
	}
}
