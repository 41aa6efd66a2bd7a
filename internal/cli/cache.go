package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/observe/recordview"
	"github.com/thindist/thindist/internal/pipeline"
)

const cacheIntro = `Usage:
  thindist cache stats [--cache-dir DIR]   the local cache's size, limit, hits, misses,
                                           evictions and the CPU time hits saved
  thindist cache clear [--cache-dir DIR]   remove every entry
  thindist cache verify [--fix] [--cache-dir DIR]
                                           read every entry and check it: each blob
                                           has the digest it is named by, each action
                                           record parses and its object is an ELF or
                                           COFF object; list the corrupt ones and exit 1
                                           if there are any. --fix also removes them
                                           (exit 0 once none remain).
                                           Links may run meanwhile.

The cache directory and its size limit are the settings links use (see
'thindist config'); every setting of 'thindist --help' is accepted.
`

func cacheUsage(w io.Writer) { io.WriteString(w, cacheIntro+settingsPointer) }

// cacheCmd runs `thindist cache stats|clear|verify [--cache-dir DIR]`.
func cacheCmd(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
	if wantsHelp(args) {
		cacheUsage(stdout)
		return 0
	}
	var cfg config.Config
	fix := false
	fs := config.NewFlagSet("thindist cache")
	// --fix belongs to verify alone, not to the settings every command takes.
	fs.Bool(&fix, "fix", "Cache", false, "with verify: remove the corrupt entries")
	fs.CommandOnly("fix")
	cfg.Register(fs)
	if code := parseFlags("thindist cache", fs, &cfg, args, env, cacheUsage); code >= 0 {
		return code
	}
	sub := fs.Args()
	if len(sub) == 1 {
		if code := unknownSubcommand("thindist cache", sub[0], []string{"stats", "clear", "verify"}, env); code >= 0 {
			return code
		}
	}
	if len(sub) != 1 || (sub[0] != "stats" && sub[0] != "clear" && sub[0] != "verify") || fix && sub[0] != "verify" {
		fmt.Fprintf(env.Stderr, "usage: thindist cache stats|clear|verify [--fix] [--cache-dir DIR]\nRun 'thindist cache --help' for more.\n")
		return 2
	}
	args = sub
	dir := cfg.CacheDir
	if dir == "" {
		dir = config.DefaultCacheDir(env.Getenv)
	}
	if args[0] == "stats" {
		// Reading needs no write access, and makes no directory.
		return cacheStats(cache.ReadDisk(dir), cfg.CacheSize, env, stdout)
	}
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist cache: %v\n", err)
		return 1
	}
	if args[0] == "verify" {
		return cacheVerify(ctx, disk, fix, env, stdout)
	}
	if err := disk.Clear(); err != nil {
		fmt.Fprintf(env.Stderr, "thindist cache clear: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "cleared %s\n", dir)
	return 0
}

// cacheStats runs `thindist cache stats` on disk; size is the --cache-size
// in effect, shown as the limit before any link applied one.
func cacheStats(disk *cache.Disk, size string, env pipeline.Env, stdout io.Writer) int {
	dir := disk.Dir()
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
	limit := size
	if s.Limit > 0 {
		limit = recordview.Bytes(s.Limit)
	}
	fmt.Fprintf(stdout, "size:       %s (limit %s)\n", recordview.Bytes(s.Bytes), limit)
	fmt.Fprintf(stdout, "hits:       %d (%.1f%%)\n", s.Hits, ratio)
	fmt.Fprintf(stdout, "misses:     %d\n", s.Misses)
	fmt.Fprintf(stdout, "evictions:  %d\n", s.Evictions)
	fmt.Fprintf(stdout, "saved CPU:  %s\n", s.SavedCPU.Round(time.Millisecond))
	return 0
}

// cacheVerify runs `thindist cache verify`: exit status 1 when corrupt
// entries remain (found without --fix, or that --fix could not remove), 0
// when there are none left.
func cacheVerify(ctx context.Context, disk *cache.Disk, fix bool, env pipeline.Env, stdout io.Writer) int {
	st, err := disk.Verify(ctx, fix)
	remain := 0
	for _, c := range st.Corrupt {
		what := "corrupt"
		if c.Removed {
			what = "removed"
		} else {
			remain++
		}
		fmt.Fprintf(stdout, "%s: %s: %s\n", what, c.Path, c.Problem)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist cache verify: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "checked %d blobs and %d action records in %s: %d corrupt", st.Blobs, st.Records, disk.Dir(), len(st.Corrupt))
	if n := len(st.Corrupt) - remain; n > 0 {
		fmt.Fprintf(stdout, ", %d removed", n)
	}
	fmt.Fprintln(stdout)
	if remain == 0 {
		return 0
	}
	if fix {
		fmt.Fprintf(stdout, "%d could not be removed (see above); remove them by hand or run 'thindist cache clear'\n", remain)
	} else {
		fmt.Fprintf(stdout, "run 'thindist cache verify --fix' to remove them\n")
	}
	return 1
}
