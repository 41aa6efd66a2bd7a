package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/record"
	"github.com/thindist/thindist/internal/report"
)

// startRecord begins the record of this run (entry "dtlto" or "link"):
// env then carries it to the pipeline, and what thindist prints goes into
// its log as well.
func startRecord(entry string, env *pipeline.Env, start time.Time) *record.Recorder {
	dir, _ := os.Getwd()
	rec := record.New(record.Run{Version: versionLine(), Entry: entry, Args: os.Args, Dir: dir, Start: start})
	env.Record = rec
	env.Stderr = io.MultiWriter(env.Stderr, rec.LogWriter())
	return rec
}

// saveRecord finishes rec with the run's phases (tl's) and error and keeps
// it in the cache directory, unless --no-record. A record that cannot be
// kept costs a warning, never the link.
func saveRecord(cfg *config.Config, env pipeline.Env, rec *record.Recorder, tl *report.Timeline, runErr error) {
	if cfg.NoRecord {
		return
	}
	for _, p := range tl.Phases() {
		rec.Phase(p.Name, p.Start, p.End)
	}
	run := rec.Finish(time.Now(), runErr)
	store := record.Open(pipeline.CacheDir(cfg, env))
	err := store.Write(run)
	if err == nil {
		err = store.AddTotals(run)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist: warning: keeping the run's record: %v (--no-record turns records off)\n", err)
	}
}
