// Package cli is thindist's command line: the DTLTO distributor entry point
// (`thindist [flags] job.json`, as lld runs it) and the subcommands.
package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/source/jobfile"
	"github.com/thindist/thindist/internal/source/linkflags"
	"github.com/thindist/thindist/internal/sys/gctune"
	"github.com/thindist/thindist/internal/sys/procstart"
	"github.com/thindist/thindist/internal/sys/rundir"
	"github.com/thindist/thindist/internal/sys/version"
)

// Main runs thindist with args (without the program name) in env
// (pipeline.StdEnv, with what thindist's own main adds: the collector's
// tuner, the thindist executable, process replacement) and returns the
// exit status.
func Main(ctx context.Context, args []string, env pipeline.Env) int {
	return run(ctx, args, env, os.Stdout)
}

// run is Main with its surroundings given (for tests).
func run(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
	start := time.Now() // the run's wall time counts from here
	args, code := commandFirst(args, env)
	if code >= 0 {
		return code
	}
	if len(args) > 0 {
		if cmd, ok := commands[args[0]]; ok {
			// Not a link: nobody waits on its start, and reading a
			// large record with the collector off would meet its limit.
			env.GC.Steady(gctune.Local())
			return cmd(ctx, args[1:], env, stdout)
		}
		switch args[0] {
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, version.Line())
			return 0
		case "link":
			if len(args) == 2 && (args[1] == "--version" || args[1] == "-version") {
				// What thindist-link --version hands on; a linker's
				// --version follows the link's --.
				fmt.Fprintln(stdout, version.Line())
				return 0
			}
			return link(ctx, args[1:], env, start)
		}
	}
	return distribute(ctx, args, env, start)
}

// commandNames are the words that name a command: the subcommands, link
// and version.
func commandNames() []string {
	names := []string{"link", "version"}
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// commandFirst moves a command named after settings (thindist --cache-dir D
// stats, thindist -q report --list) to the front, where run looks for it;
// the settings go to the command, which reads them as its own. A word in
// its place that is neither a command nor an existing file but is near a
// command's name is a misspelt command (thindist reprot): said, with the
// command meant, for exit status 2 (the second result; -1 goes on).
// Anything else is the DTLTO entry point's: lld runs `thindist
// [distributor args] JOBFILE`, and a job file is a file.
func commandFirst(args []string, env pipeline.Env) ([]string, int) {
	names := commandNames()
	if len(args) == 0 || slices.Contains(names, args[0]) {
		return args, -1
	}
	// thindist link's settings may come first too (thindist
	// --in-process-below=1M link -- ...).
	i := linkflags.NewFlagSet(new(config.Config), new(linkflags.Flags)).FirstArg(args)
	if i < 0 {
		return args, -1
	}
	word := args[i]
	switch {
	case word == "help" || word == "version":
		return args[i:], -1 // settings change neither
	case slices.Contains(names, word):
		return slices.Concat([]string{word}, args[:i], args[i+1:]), -1
	}
	if _, err := os.Stat(word); err == nil {
		return args, -1 // a job file
	}
	if near := config.Nearest(word, names); near != "" {
		fmt.Fprintf(env.Stderr, "thindist: unknown command %q; did you mean %q?\nRun 'thindist help' for the commands.\n", word, near)
		return nil, 2
	}
	return args, -1
}

// unknownSubcommand says that word is none of the subcommands subs of
// command (thindist server stat), with the one meant if one is near, and
// returns exit status 2; -1 when word is one of subs.
func unknownSubcommand(command, word string, subs []string, env pipeline.Env) int {
	if slices.Contains(subs, word) {
		return -1
	}
	hint := "; it takes " + strings.Join(subs, ", ")
	if near := config.Nearest(word, subs); near != "" {
		hint = fmt.Sprintf("; did you mean %q?", near)
	}
	fmt.Fprintf(env.Stderr, "%s: unknown command %q%s\nRun '%s --help' for more.\n", command, word, hint, command)
	return 2
}

// commands are the subcommands that are not links.
var commands = map[string]command{
	"help":   noContext(help),
	"cache":  cacheCmd,
	"config": noContext(configCmd),
	"report": noContext(reportCmd),
	"stats":  noContext(statsCmd),
	"doctor": doctorCmd,
	"server": serverCmd,
}

type command func(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int

func noContext(f func(args []string, env pipeline.Env, stdout io.Writer) int) command {
	return func(_ context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
		return f(args, env, stdout)
	}
}

const intro = `thindist runs LLVM ThinLTO backend compilations: locally in parallel, and never
twice for the same inputs.

Usage:
  thindist [flags] JOBFILE     run the jobs of an lld DTLTO job file (lld calls this)
  thindist link [flags] -- LINK-COMMAND
                               distributed ThinLTO with any lld: see 'thindist link --help'
  thindist cache stats|clear|verify
                               show, empty or check the local cache
  thindist config [flags]      print every effective setting and where it came from
  thindist report [last|ID|FILE] [--html FILE|--json|--list]
                               show a run's record: where the time went, what ran
                               where, why modules missed the cache; see --help
  thindist stats [--json] [--zero]
                               hits, misses, CPU saved, remote use over all runs
  thindist doctor [--compiler CLANG] [--remote URL [--remote-* ...]]
                               check a remote execution service: connection,
                               capabilities, CAS, the workers' compiler version
  thindist server status [--json] | stop
                               show or end the per-user server that keeps
                               backend workers warm between links
  thindist help [COMMAND]      this text, or a command's own help
  thindist help settings       the settings every command takes, with their
                               environment variables and defaults
  thindist --version           print the version

As lld's DTLTO distributor (LLVM 21 and later):
  clang -flto=thin -fuse-ld=lld -fthinlto-distributor=$(command -v thindist) \
        -Xthinlto-distributor=--jobs=8 a.o b.o -o app

Settings come from, in increasing precedence: their defaults, the default config
file ($XDG_CONFIG_HOME/thindist/config, else ~/.config/thindist/config), the file
given with --config, the environment variable shown with each flag, and the
command line. A config file holds one 'flag = value' a line, named as the flags
without dashes. 'thindist config' shows what is in effect and where it came from.
Flags go before or after a command: thindist --cache-dir DIR stats.
`

// help runs `thindist help [COMMAND]`.
func help(args []string, env pipeline.Env, stdout io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	topics := map[string]func(io.Writer){
		"link":     linkUsage,
		"cache":    cacheUsage,
		"config":   configUsage,
		"doctor":   doctorHelp,
		"report":   reportUsage,
		"stats":    statsUsage,
		"server":   serverUsage,
		"settings": settingsHelp,
		"flags":    settingsHelp,
	}
	h, ok := topics[args[0]]
	if !ok {
		hint := ""
		if near := config.Nearest(args[0], slices.Sorted(maps.Keys(topics))); near != "" {
			hint = fmt.Sprintf("; did you mean %q?", near)
		}
		fmt.Fprintf(env.Stderr, "thindist help: unknown command %q%s (commands: link, cache, config, doctor, report, server, stats; or settings)\n", args[0], hint)
		return 2
	}
	h(stdout)
	return 0
}

func newFlags(cfg *config.Config) *config.FlagSet {
	fs := config.NewFlagSet("thindist")
	cfg.Register(fs)
	return fs
}

// helpWithFlags prints a command's intro, then the settings every command
// shares.
func helpWithFlags(w io.Writer, intro string) {
	io.WriteString(w, intro)
	var cfg config.Config
	newFlags(&cfg).PrintDefaults(w)
}

// settingsPointer ends a command's help, after its own flags: the shared
// settings are listed once, by 'thindist help settings'.
const settingsPointer = `
Every setting (--cache-dir, --jobs, --remote, ..., each with its THINDIST_*
variable and config-file line) is accepted too: 'thindist help settings'
lists them.
`

// helpOwnFlags prints a command's intro, its own flags, then where the
// shared settings are described.
func helpOwnFlags(w io.Writer, intro string, fs *config.FlagSet) {
	io.WriteString(w, intro)
	fs.PrintOwn(w)
	io.WriteString(w, settingsPointer)
}

// settingsHelp runs `thindist help settings`.
func settingsHelp(w io.Writer) {
	helpWithFlags(w, `Settings every thindist command takes. Each is a flag (--name=value), an
environment variable (shown with it) and a config-file line (name = value), in
increasing precedence: config file, environment, command line. 'thindist
config' shows the values in effect and where they came from. thindist link's
own settings (--in-process-below, --compdb, ...) are set the same ways, and
'thindist link --help' lists them; a THINDIST_* variable that no setting reads
is warned about.
`)
}

func usage(w io.Writer) {
	helpWithFlags(w, intro)
	io.WriteString(w, `
Exit status: 0 when every backend compiled and produced an object file; 1 when
any failed (the failing module, its exit status, the command and its stderr are
printed); 2 for a usage or job-file error, in which case nothing ran; 130 when
interrupted (SIGINT, SIGTERM or SIGHUP: every compiler is stopped and every
temporary file removed).
`)
}

// parseFlags reads args into fs and checks cfg, for the command name
// ("thindist", "thindist link", ...). It returns the exit status to stop
// with, or -1 to go on; --help prints help to stdout.
func parseFlags(name string, fs *config.FlagSet, cfg *config.Config, args []string, env pipeline.Env, help func(io.Writer)) int {
	if name != "thindist link" && name != "thindist config" {
		// thindist link's settings, in a config file every command
		// reads or the environment of a build, are no typos here.
		fs.Know(linkflags.NewFlagSet(new(config.Config), new(linkflags.Flags)))
	}
	err := fs.Parse(args, env.Getenv)
	if env.Environ != nil {
		fs.CheckEnviron(env.Environ())
	}
	for _, w := range fs.Warnings() {
		// A config file every link of a build reads: said by the first.
		sum := sha256.Sum256([]byte(w))
		if rundir.FirstInBuild(rundir.Path(env.Getenv), "config-warning-"+hex.EncodeToString(sum[:6])) {
			fmt.Fprintf(env.Stderr, "%s: warning: %s\n", name, w)
		}
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(os.Stdout)
			return 0
		}
		fmt.Fprintf(env.Stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return 2
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return 2
	}
	return -1
}

// checkCacheDir stops a command that runs backends, before anything runs,
// when the cache directory the user named cannot be used.
func checkCacheDir(name string, fs *config.FlagSet, cfg *config.Config, env pipeline.Env) int {
	if err := pipeline.CheckCacheDir(cfg); err != nil {
		fmt.Fprintf(env.Stderr, "%s: error: %v\n(the directory comes from %s; name one you can write, or use --no-cache)\n",
			name, err, fs.Source("cache-dir"))
		return 2
	}
	return -1
}

func distribute(ctx context.Context, args []string, env pipeline.Env, start time.Time) int {
	sess := pipeline.NewSession("dtlto", os.Args, env, start)
	env = sess.Env
	var cfg config.Config
	fs := newFlags(&cfg)
	if code := parseFlags("thindist", fs, &cfg, args, env, usage); code >= 0 {
		return code
	}
	if code := checkCacheDir("thindist", fs, &cfg, env); code >= 0 {
		return code
	}
	sess.QuietJobserver(&cfg)
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintf(env.Stderr, "thindist: no job file given\nRun 'thindist --help' for usage.\n")
		return 2
	}
	if len(rest) > 1 {
		fmt.Fprintf(env.Stderr, "thindist: unexpected arguments before the job file: %s\n"+
			"(thindist flags go before the job file; from clang pass them with -Xthinlto-distributor=--flag=value)\n",
			strings.Join(rest[:len(rest)-1], " "))
		return 2
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist: %v\n", err)
		return 2
	}
	// Connecting to the remote service takes round trips, reading the
	// history of earlier links takes milliseconds, and neither needs
	// anything from the job file: they go on while the file is read.
	sess.Env.Dialing = pipeline.StartDial(ctx, &cfg)
	sess.ReadAhead(&cfg)
	defer sess.Env.Dialing.Close() // if the run did not take it
	jf, err := jobfile.Load(rest[0], dir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist: error: %v\n", err)
		return 2
	}
	// lld ran thindist after reading every input and running the thin
	// link: what it did before is part of where the link's time went.
	var linker []string
	if began, err := procstart.ParentLinker(); err == nil {
		linker, _ = procstart.Cmdline(os.Getppid())
		sess.LinkerBegan(began, linker)
	}
	// Archive members by the archive the user linked, not lld's copies.
	jobfile.NameMembers(jf.Actions, linker, dir)
	if jf.Schema == "lld" {
		asInProcess(jf.Actions)
	}
	sess.SetOutput(jf.LinkerOutput)
	err = sess.Run(ctx, &cfg, jf.Actions)
	code := exitCode(err, env)
	sess.Finish(&cfg, err)
	return code
}

func exitCode(err error, env pipeline.Env) int {
	if err == nil {
		return 0
	}
	var rep *pipeline.Reported
	if !errors.As(err, &rep) {
		fmt.Fprintf(env.Stderr, "thindist: error: %v\n", err)
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}
