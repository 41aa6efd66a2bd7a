package config

import (
	"fmt"
	"runtime"
)

// Config is everything that shapes a run, whatever its entry point (an lld
// job file, `thindist link`, the plugin).
type Config struct {
	// Jobs bounds the compiler processes on this machine.
	Jobs int
	// Trace, if set, is where a Chrome trace of the run is written.
	Trace string
	// Quiet drops the summary line.
	Quiet bool
	// Progress is "auto" (on a terminal), "always" or "never".
	Progress string
}

// Register defines the flags that fill c.
func (c *Config) Register(fs *FlagSet) {
	fs.Int(&c.Jobs, "jobs", "Execution", runtime.NumCPU(),
		"compile at most N backends at once on this machine. Under `make -jN` thindist also\n"+
			"takes a token from make's jobserver (MAKEFLAGS --jobserver-auth) for every process\n"+
			"after its first, so parallel links never oversubscribe the machine")
	fs.Alias("j", "jobs")
	fs.String(&c.Trace, "trace", "Reporting", "FILE", "",
		"write a Chrome trace of the run to FILE (JSON trace events, one lane per slot);\n"+
			"open it in https://ui.perfetto.dev or chrome://tracing")
	fs.Bool(&c.Quiet, "quiet", "Reporting", false, "do not print the summary line at the end")
	fs.Alias("q", "quiet")
	fs.String(&c.Progress, "progress", "Reporting", "auto|always|never", "auto",
		"draw a live progress line on stderr: auto draws it when stderr is a terminal")
}

// Check validates c after parsing.
func (c *Config) Check() error {
	if c.Jobs < 1 {
		return fmt.Errorf("--jobs must be at least 1, not %d", c.Jobs)
	}
	switch c.Progress {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("--progress must be auto, always or never, not %q", c.Progress)
	}
	return nil
}
