// Package executor runs backend actions. One small interface, Executor,
// taking a Job (everything an executor needs of one action), and
// behaviours composed around it as decorators, in the manner of Buildbarn's
// BlobAccess: Local runs processes, Verified rejects results that must never
// reach the linker, Fallback, Race, Hedge and Hybrid share the work between
// remote execution and this machine, and other packages add a cache and
// remote execution in front of them. Scheduling policy is not here: the
// Hybrid's and the Race's slots come from interfaces they declare (Sides,
// Spare), which internal/sched/dispatch implements. What an executor tells
// the scheduler as a job runs goes through the Job's Events. Every
// executor names itself (String); Describe prints a chain;
// docs/architecture.md shows the chain of each mode.
package executor

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/sys/digest"
)

// Executor runs one action (j.Action) and leaves its outputs at j.Out[i] for
// j.Action.Outputs[i]. The caller owns those paths (a staging area it later
// renames from), so an executor never writes an action's final outputs
// itself.
//
// A nil error means the command ran; Result says how it ended. An error means
// the executor could not run it at all (missing input, unreachable server,
// cancellation); decorators decide whether another executor may try.
type Executor interface {
	Execute(ctx context.Context, j Job) (*Result, error)
}

// Func adapts a function to Executor.
type Func func(ctx context.Context, j Job) (*Result, error)

// Execute calls f.
func (f Func) Execute(ctx context.Context, j Job) (*Result, error) {
	return f(ctx, j)
}

// Where says which executor produced a result.
type Where uint8

const (
	Local       Where = iota // a process on this machine
	Remote                   // remote execution
	LocalCache               // the local action cache
	RemoteCache              // the remote action cache
)

func (w Where) String() string {
	switch w {
	case Remote:
		return "remote"
	case LocalCache:
		return "cache"
	case RemoteCache:
		return "remote-cache"
	}
	return "local"
}

// Cached reports whether the result came from a cache rather than a run.
func (w Where) Cached() bool { return w == LocalCache || w == RemoteCache }

// Result is how an action ended.
type Result struct {
	proc.Exit  // how the compiler ended
	Provenance // who produced the result, and how
	Stdout     []byte
	Stderr     []byte
	// CPU is the compiler's user+system time (for a cache hit: the time the
	// original run took, i.e. what the hit saved).
	CPU time.Duration
	// Wall is how long the executor took.
	Wall time.Duration
	// MaxRSS is the compiler's peak resident set size in bytes, 0 when
	// unknown.
	MaxRSS int64
	// BytesUp and BytesDown are what the action sent to and received
	// from a remote service: blobs uploaded and read, and the contents
	// inlined in its action results. Written by Metered alone, from what
	// the executors below it (the remote executor, the remote cache)
	// counted as they moved bytes, every side of a race included.
	BytesUp, BytesDown int64
	// OutputDigests[i], when known, is the digest of out[i], so a cache
	// storing the result need not read and hash the outputs again. Nil:
	// not known. Written by the executor that wrote the outputs and
	// verified each against its digest as it did: the remote executor
	// (remote.collect) and a cache's hit (cache.Executor).
	OutputDigests []digest.Digest
	// ObjectChecked: the object at out[0] is known to be well formed, so
	// a Verified above need not read it again. Written by the executor
	// that checked it: Verified, which found it so; or the remote
	// executor and a cache, which checked the bytes they wrote there
	// (CheckObjectBytes, CheckObject). Executors that move outputs
	// (Race) move them whole, with the result they belong to.
	ObjectChecked bool
	// Ran, when set, is the command that ran, where it is not the
	// action's own command run here: a remote worker's (the workers'
	// compiler, the paths of the action's input root), and RanDir its
	// working directory there, relative to the input root. Written by
	// the remote executor alone.
	Ran    []string
	RanDir string
	// Steps are where the executor's time went, in order (remote
	// execution: uploading inputs, queued, executing, downloading
	// outputs), for the trace and the Dispatcher's pace; none when it did
	// one thing. Written by the remote executor alone.
	Steps []Step
}

// BackendError is a backend compilation that ran and failed or produced an
// output that must not be linked. It carries everything a user needs to see
// and to re-run the command by hand.
type BackendError struct {
	Action *action.Action
	Result *Result
	Reason string // why the result is rejected
	// Said: the compiler exited 0 but said why its result is unusable
	// (the backend error marker, or an error on stderr beside an empty
	// or malformed object): its own failure (Final), as an exit status
	// would be.
	Said bool
	// Kept, if set, is a directory holding copies of the inputs and a
	// script that runs the command on them (the linker deletes the
	// originals).
	Kept string
}

// Rerunnable says whether the error names a script that runs the
// command again (Kept), so an entry point need not say how to keep its
// inputs.
func (e *BackendError) Rerunnable() bool { return e.Kept != "" }

func (e *BackendError) Error() string {
	var b strings.Builder
	where := ""
	if e.Result != nil && e.Result.Where == Remote {
		where = " on a remote worker"
	}
	fmt.Fprintf(&b, "backend compilation of %s failed%s: %s", e.Action.ID, where, e.Reason)
	if e.Result != nil && len(e.Result.Ran) > 0 {
		dir := "the action's input root"
		if e.Result.RanDir != "" {
			dir = action.ShellQuote([]string{e.Result.RanDir}) + " of " + dir
		}
		fmt.Fprintf(&b, "\n  command (run in %s, on the cluster):\n    %s", dir, action.ShellQuote(e.Result.Ran))
	} else {
		fmt.Fprintf(&b, "\n  command (run in %s):\n    %s", action.ShellQuote([]string{e.Action.Dir}),
			action.ShellQuote(e.Action.Command()))
	}
	if e.Kept != "" {
		fmt.Fprintf(&b, "\n  the linker deletes its index files; to run it again: %s (on copies of its inputs, "+
			"kept until this output links, for a few days at most)", action.ShellQuote([]string{filepath.Join(e.Kept, "rerun.sh")}))
	}
	if e.Result != nil {
		if s := strings.TrimSpace(string(e.Result.Stderr)); s != "" {
			b.WriteString("\n  stderr:\n    ")
			b.WriteString(strings.ReplaceAll(s, "\n", "\n    "))
		}
	}
	return b.String()
}
