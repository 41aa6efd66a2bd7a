package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Config is everything that shapes a run, whatever its entry point (an lld
// job file, `thindist link`, the plugin).
type Config struct {
	// Jobs bounds the compiler processes on this machine.
	Jobs int
	// NoJobserverWarning drops the warning that make's jobserver is not
	// available to the recipe (which runs with Jobs alone).
	NoJobserverWarning bool
	// Trace, if set, is where a Chrome trace of the run is written.
	Trace string
	// Quiet drops the summary line.
	Quiet bool
	// NoRecord keeps no record of the run (see `thindist report`).
	NoRecord bool
	// Progress is "auto" (on a terminal), "always" or "never".
	Progress string

	// CacheDir is the local action cache; "" means DefaultCacheDir().
	CacheDir string
	// CacheSize bounds the local cache, e.g. "10G".
	CacheSize string
	// NoCache turns the local cache off.
	NoCache bool
	// NoForkServer execs every local compiler instead of forking it from a
	// server started once per compiler.
	NoForkServer bool
	// Worker is the thindist-worker executable; "" means the one beside
	// thindist's own, if any (see internal/local/worker).
	Worker string
	// NoWorker compiles no backend on a worker.
	NoWorker bool
	// WorkerIdle is how long the per-user worker server keeps the workers
	// after its last link (internal/local/workerserver); 0 means no server, each
	// link runs workers of its own; below 0, ServerIdle's default.
	WorkerIdle time.Duration
	// ServerDir is the worker server's directory; "" means
	// rundir.Path ($XDG_RUNTIME_DIR/thindist, else
	// /tmp/thindist-UID).
	ServerDir string

	// ConfigFile is a file of `flag = value` lines read before the
	// environment and the command line (lowest precedence).
	ConfigFile string

	Remote Remote
}

// DefaultCacheDir is $XDG_CACHE_HOME/thindist, else ~/.cache/thindist.
func DefaultCacheDir(getenv func(string) string) string {
	if d := getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "thindist")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "thindist")
	}
	return filepath.Join(os.TempDir(), "thindist-cache")
}

// CacheRoot is the cache directory in use: --cache-dir, else the default.
func (c *Config) CacheRoot(getenv func(string) string) string {
	if c.CacheDir != "" {
		return c.CacheDir
	}
	return DefaultCacheDir(getenv)
}

// Register defines the flags that fill c.
func (c *Config) Register(fs *FlagSet) {
	fs.inSettings = true
	defer func() { fs.inSettings = false }()
	fs.Int(&c.Jobs, "jobs", "Execution", runtime.NumCPU(), 1,
		"compile at most N backends at once on this machine. Under `make -jN` thindist also\n"+
			"takes a token from make's jobserver (MAKEFLAGS --jobserver-auth) for every process\n"+
			"after its first, so parallel links never oversubscribe the machine")
	fs.Alias("j", "jobs")
	fs.DefaultText("jobs", "the number of CPUs")
	fs.Bool(&c.NoJobserverWarning, "no-jobserver-warning", "Execution", false,
		"do not warn that make's jobserver is not available to a recipe. make 4.3 shares it only\n"+
			"with recipes marked '+' (CMake's and Kbuild's link rules are not); such a link runs with\n"+
			"--jobs alone, and thindist says so once per make invocation unless this is set")
	fs.String(&c.Trace, "trace", "Reporting", "FILE", "",
		"write a Chrome trace of the run to FILE (JSON trace events, one lane per slot, with the\n"+
			"command line and output as metadata); open it in https://ui.perfetto.dev or\n"+
			"chrome://tracing. In FILE, %p stands for thindist's process ID and %t for the time it\n"+
			"started (20261123-201946.123), so parallel links write traces of their own")
	fs.Bool(&c.Quiet, "quiet", "Reporting", false, "do not print the summary line at the end")
	fs.Bool(&c.NoRecord, "no-record", "Reporting", false,
		"keep no record of this run. By default every run leaves one in the cache directory\n"+
			"(records/, the last 100 runs or 64 MiB): what ran where and when, and why each\n"+
			"compiled module missed the cache; 'thindist report' shows it, 'thindist stats' sums them")
	fs.Alias("q", "quiet")
	fs.String(&c.CacheDir, "cache-dir", "Cache", "DIR", "",
		"keep backend results in DIR and reuse them whenever an action's inputs, flags and\n"+
			"compiler are the same")
	fs.DefaultText("cache-dir", "$XDG_CACHE_HOME/thindist, else ~/.cache/thindist")
	fs.Size(&c.CacheSize, "cache-size", "Cache", "10G",
		"evict least recently used entries when the cache grows past SIZE (e.g. 500M, 10G)")
	fs.Bool(&c.NoCache, "no-cache", "Cache", false, "neither read nor write the local cache")
	fs.Bool(&c.NoForkServer, "no-fork-server", "Execution", false,
		"exec every local compiler process. By default thindist starts each compiler once,\n"+
			"stopped before main (a small LD_PRELOAD shim it builds with that compiler), and\n"+
			"forks it for every job: the job's argv, environment and directory are the same,\n"+
			"the objects are byte-identical, and most of the ~30 ms a Debian clang spends\n"+
			"loading libLLVM per process is paid once. Compilers it cannot serve (scripts,\n"+
			"static binaries) are exec'd")
	fs.String(&c.Worker, "worker", "Execution", "PATH", "",
		"compile backends on the thindist-worker at PATH: a program linked against one\n"+
			"LLVM's clang libraries that compiles many backends in one process, each as the\n"+
			"job's clang would (same objects, messages and exit status). Used only for a clang\n"+
			"of that very build and options it is tested with; other jobs, and any job whose\n"+
			"worker crashes or hangs, are forked or exec'd")
	fs.DefaultText("worker", "thindist-worker beside the thindist executable, if there")
	fs.Bool(&c.NoWorker, "no-worker", "Execution", false, "compile no backend on a thindist-worker")
	c.WorkerIdle = -1
	fs.Var(idleValue{&c.WorkerIdle}, "worker-idle", "Execution", "DURATION",
		"keep the workers warm for DURATION after a link, in a per-user server that the next\n"+
			"links reuse (no worker to start, no compiler to check): started on demand, it exits\n"+
			"after DURATION without a link ('thindist server status|stop'). 0: no server, each\n"+
			"link runs workers of its own and leaves no process behind")
	fs.DefaultText("worker-idle", "5m, or 0 when the environment variable CI is set")
	fs.String(&c.ServerDir, "server-dir", "Execution", "DIR", "",
		"the worker server's directory (its socket, lock and log), which must be yours alone\n"+
			"(mode 0700, not a symbolic link); otherwise links run workers of their own")
	fs.DefaultText("server-dir", "$XDG_RUNTIME_DIR/thindist, else /tmp/thindist-UID")
	fs.Choice(&c.Progress, "progress", "Reporting", []string{"auto", "always", "never"}, "auto",
		"draw a live progress line on stderr: auto draws it when stderr is a terminal")
	fs.String(&c.ConfigFile, "config", "Configuration", "FILE", "",
		"read settings from FILE: one `flag = value` a line (flag names without dashes,\n"+
			"repeatable flags on several lines, '#' comments); the environment and the\n"+
			"command line win over it")
	fs.configFlag = "config"
	c.Remote.register(fs)
}

// DefaultWorkerIdle is WorkerIdle's default outside CI.
const DefaultWorkerIdle = 5 * time.Minute

// ServerIdle is the worker server's idle period in effect: WorkerIdle as
// set, else DefaultWorkerIdle, or 0 (no server) when the environment
// variable CI is set, as CI services set it, so that a CI build leaves no
// process behind.
func (c *Config) ServerIdle(getenv func(string) string) time.Duration {
	switch {
	case c.WorkerIdle >= 0:
		return c.WorkerIdle
	case getenv("CI") != "":
		return 0
	}
	return DefaultWorkerIdle
}

// idleValue is --worker-idle: a duration, or "auto" (below 0) for
// ServerIdle's default.
type idleValue struct{ p *time.Duration }

func (v idleValue) String() string {
	if v.p == nil || *v.p < 0 {
		return "auto"
	}
	return v.p.String()
}

func (v idleValue) Set(s string) error {
	if strings.TrimSpace(s) == "auto" {
		*v.p = -1
		return nil
	}
	if err := (durationValue{v.p}).Set(s); err != nil {
		return badValue(s, "a duration such as 30s or 5m, 0 for no server, or auto")
	}
	return nil
}

// Check validates what no single setting can (each setting's value is
// checked where it is set, whatever its source: values.go).
func (c *Config) Check() error {
	return c.Remote.check()
}

// CacheLimit is CacheSize in bytes.
func (c *Config) CacheLimit() int64 {
	n, _ := ParseSize(c.CacheSize)
	return n
}

// ParseSize reads a size in bytes such as "10G", "512M", "300k", "256KiB"
// or "1000000" (binary multiples).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid size %q (use e.g. 10G, 512M)", s)
	}
	return int64(v * float64(mult)), nil
}
