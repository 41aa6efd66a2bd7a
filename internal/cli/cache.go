package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/runreport"
)

const cacheIntro = `Usage:
  thindist cache stats [--cache-dir DIR]   the local cache's size, limit, hits, misses,
                                           evictions and the CPU time hits saved
  thindist cache clear [--cache-dir DIR]   remove every entry

The cache directory and its size limit are the settings links use (see
'thindist config'); every setting of 'thindist --help' is accepted.
`

func cacheUsage(w io.Writer) { helpWithFlags(w, cacheIntro) }

// cacheCmd runs `thindist cache stats|clear [--cache-dir DIR]`.
func cacheCmd(args []string, env pipeline.Env, stdout io.Writer) int {
	if wantsHelp(args) {
		cacheUsage(stdout)
		return 0
	}
	if len(args) == 0 || (args[0] != "stats" && args[0] != "clear") {
		fmt.Fprintf(env.Stderr, "usage: thindist cache stats|clear [--cache-dir DIR]\nRun 'thindist cache --help' for more.\n")
		return 2
	}
	var cfg config.Config
	fs := newFlags(&cfg)
	if code := parseFlags("thindist cache", fs, &cfg, args[1:], env, cacheUsage); code >= 0 {
		return code
	}
	dir := cfg.CacheDir
	if dir == "" {
		dir = config.DefaultCacheDir(env.Getenv)
	}
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist cache: %v\n", err)
		return 1
	}
	if args[0] == "clear" {
		if err := disk.Clear(); err != nil {
			fmt.Fprintf(env.Stderr, "thindist cache clear: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "cleared %s\n", dir)
		return 0
	}
	s, err := disk.Stats()
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist cache stats: %v\n", err)
		return 1
	}
	ratio := 0.0
	if s.Hits+s.Misses > 0 {
		ratio = 100 * float64(s.Hits) / float64(s.Hits+s.Misses)
	}
	fmt.Fprintf(stdout, "directory:  %s\n", dir)
	fmt.Fprintf(stdout, "entries:    %d\n", s.Entries)
	// The limit the links applied, which this command's own settings
	// need not match; before any link, the current setting.
	limit := cfg.CacheSize
	if s.Limit > 0 {
		limit = runreport.Bytes(s.Limit)
	}
	fmt.Fprintf(stdout, "size:       %s (limit %s)\n", runreport.Bytes(s.Bytes), limit)
	fmt.Fprintf(stdout, "hits:       %d (%.1f%%)\n", s.Hits, ratio)
	fmt.Fprintf(stdout, "misses:     %d\n", s.Misses)
	fmt.Fprintf(stdout, "evictions:  %d\n", s.Evictions)
	fmt.Fprintf(stdout, "saved CPU:  %s\n", s.SavedCPU.Round(time.Millisecond))
	return 0
}
