package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/observe/recordview"
	"github.com/thindist/thindist/internal/pipeline"
)

const statsIntro = `Usage:
  thindist stats [--json] [--zero] [--cache-dir DIR]

Counters over every recorded run since they were last zeroed, and the local
cache's state: local cache hits and misses (the cache's own counters, which
'thindist cache stats' shows too: every run that used the cache, recorded or
not, and every action it missed, failed or not), remote cache hits and
misses, the CPU time the hits saved, the actions compiled remotely, locally,
raced and fallen back, the bytes sent to and read from the remote service,
entries evicted, and the size limit the links applied (the one in force, from
the last run). --zero resets the counters, the runs' and the cache's; entries
and records are kept.

`

// statsView is what `thindist stats` shows, and its JSON.
type statsView struct {
	Dir    string        `json:"cache_dir"`
	Totals record.Totals `json:"runs"`
	// Cache is the local cache's state and its own counters: the hits
	// and misses are the ones `thindist cache stats` shows.
	Cache struct {
		Hits         int64 `json:"hits"`
		Misses       int64 `json:"misses"`
		Entries      int64 `json:"entries"`
		Bytes        int64 `json:"bytes"`
		Limit        int64 `json:"limit"`
		Evictions    int64 `json:"evictions"`
		EvictedBytes int64 `json:"evicted_bytes"`
	} `json:"cache"`
}

func newStatsFlags(cfg *config.Config, asJSON, zero *bool) *config.FlagSet {
	fs := config.NewFlagSet("thindist stats")
	fs.Bool(asJSON, "json", "Stats", false, "print the statistics as JSON")
	fs.Bool(zero, "zero", "Stats", false, "reset the counters; keep the cache's entries and the records")
	fs.CommandOnly("json")
	fs.CommandOnly("zero")
	cfg.Register(fs)
	return fs
}

func statsUsage(w io.Writer) {
	var cfg config.Config
	var asJSON, zero bool
	helpOwnFlags(w, statsIntro, newStatsFlags(&cfg, &asJSON, &zero))
}

// statsCmd runs `thindist stats`.
func statsCmd(args []string, env pipeline.Env, stdout io.Writer) int {
	var cfg config.Config
	var asJSON, zero bool
	fs := newStatsFlags(&cfg, &asJSON, &zero)
	if code := parseFlags("thindist stats", fs, &cfg, args, env, statsUsage); code >= 0 {
		return code
	}
	if len(fs.Args()) > 0 {
		fmt.Fprintf(env.Stderr, "thindist stats: unexpected arguments %q\n", fs.Args())
		return 2
	}
	dir := cfg.CacheRoot(env.Getenv)
	store := record.Open(dir)
	if zero {
		disk, err := cache.OpenDisk(dir)
		if err != nil {
			fmt.Fprintf(env.Stderr, "thindist stats --zero: %v\n", err)
			return 1
		}
		if err := store.ZeroTotals(time.Now()); err != nil {
			fmt.Fprintf(env.Stderr, "thindist stats --zero: %v\n", err)
			return 1
		}
		if err := disk.ZeroStats(); err != nil {
			fmt.Fprintf(env.Stderr, "thindist stats --zero: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "statistics zeroed in %s\n", dir)
		return 0
	}
	// Reading needs no write access, and makes no directory.
	disk := cache.ReadDisk(dir)
	var v statsView
	var err error
	v.Dir = dir
	if v.Totals, err = store.Totals(); err != nil {
		fmt.Fprintf(env.Stderr, "thindist stats: %v\n", err)
		return 1
	}
	cs, err := disk.Stats()
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist stats: %v\n", err)
		return 1
	}
	v.Cache.Hits, v.Cache.Misses = cs.Hits, cs.Misses
	v.Cache.Entries, v.Cache.Bytes, v.Cache.Evictions, v.Cache.EvictedBytes = cs.Entries, cs.Bytes, cs.Evictions, cs.EvictedBytes
	// The limit the links applied; only before any link, this command's.
	v.Cache.Limit = cs.Limit
	if v.Cache.Limit == 0 {
		v.Cache.Limit = v.Totals.CacheLimit
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return 0
	}
	writeStats(stdout, &v, cfg.CacheLimit())
	return 0
}

func writeStats(w io.Writer, v *statsView, ownLimit int64) {
	t := &v.Totals
	pct := func(a, b int64) string {
		if a+b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(a+b))
	}
	since := "the first recorded run"
	if !t.Since.IsZero() {
		since = t.Since.Local().Format("2006-01-02 15:04:05")
	}
	usd := func(n int64) time.Duration { return (time.Duration(n) * time.Microsecond).Round(time.Millisecond) }
	fmt.Fprintf(w, "Cache directory          %s\n", v.Dir)
	fmt.Fprintf(w, "Counting since           %s\n", since)
	fmt.Fprintf(w, "Runs                     %d\n", t.Runs)
	fmt.Fprintf(w, "Backend actions          %d\n", t.Actions)
	c := &v.Cache
	fmt.Fprintf(w, "Local cache hits         %d (%s)\n", c.Hits, pct(c.Hits, c.Misses))
	fmt.Fprintf(w, "Local cache misses       %d\n", c.Misses)
	fmt.Fprintf(w, "Remote cache hits        %d (%s)\n", t.RemoteHits, pct(t.RemoteHits, t.RemoteMisses))
	fmt.Fprintf(w, "Remote cache misses      %d\n", t.RemoteMisses)
	fmt.Fprintf(w, "CPU saved by hits        %s\n", usd(t.SavedCPU))
	fmt.Fprintf(w, "CPU compiling            %s\n", usd(t.CPU))
	fmt.Fprintf(w, "Compiled remotely        %d\n", t.Remote)
	fmt.Fprintf(w, "Compiled locally         %d (of which %d fell back from remote)\n", t.Local, t.FellBack)
	fmt.Fprintf(w, "Raced local and remote   %d\n", t.Raced)
	fmt.Fprintf(w, "Failed                   %d\n", t.Failed)
	fmt.Fprintf(w, "Bytes up / down          %s / %s\n", recordview.Bytes(t.BytesUp), recordview.Bytes(t.BytesDown))
	fmt.Fprintf(w, "Cache entries            %d\n", v.Cache.Entries)
	fmt.Fprintf(w, "Cache size               %s\n", recordview.Bytes(v.Cache.Bytes))
	limit := "none recorded yet"
	switch {
	case v.Cache.Limit > 0:
		limit = recordview.Bytes(v.Cache.Limit) + " (as the links applied it)"
	case ownLimit > 0:
		limit = recordview.Bytes(ownLimit) + " (no link has applied one yet; this is the current setting)"
	}
	fmt.Fprintf(w, "Cache size limit         %s\n", limit)
	fmt.Fprintf(w, "Evicted entries          %d (%s)\n", v.Cache.Evictions, recordview.Bytes(v.Cache.EvictedBytes))
}
