// Package record keeps a record of every run in the cache directory: what
// ran, where, when and why it was not a cache hit, for `thindist report`,
// `thindist stats` and for ordering the next run's work by how long each
// module took before.
//
// A record is one JSON file per run (schema below, versioned by Schema).
// Files are written whole under a temporary name and renamed into place, so
// concurrent links never see each other's half-written records; the oldest
// of an output are dropped beyond a count per output, and, once the
// directory holds more than a count or a size, the oldest of the output
// that holds the most.
package record

import (
	"time"

	"github.com/thindist/thindist/internal/local/proc"
)

// Schema is the version of the record format. A reader refuses records of
// a later version rather than misread them; fields are only ever added
// within a version.
const Schema = 1

// Run is the record of one run of thindist.
type Run struct {
	Schema  int    `json:"schema"`
	ID      string `json:"id"`
	Version string `json:"version"` // thindist's
	// Entry is how thindist was run: "dtlto" (as lld's distributor),
	// "link" (thindist link) or "plugin".
	Entry string   `json:"entry"`
	Args  []string `json:"args"` // thindist's own command line (the plugin's: the linker's)
	Dir   string   `json:"dir"`  // its working directory
	// Output is the file the link writes (lld's linker_output, the link's
	// -o), when known. It comes right after Dir, so that finding a
	// directory's last link reads a record no further (recordHead).
	Output string `json:"output,omitempty"`
	// Times is each module's compile time in µs, as History orders by
	// (its CPU time, else its wall time; a hit's is the original
	// compile's), filled by Store.Write. It comes right after Dir and
	// Output, so that planning a link reads a record no further
	// (recordHead).
	Times map[string]int64 `json:"times,omitempty"`
	PID   int              `json:"pid"`
	// Linker is the command line of the linker that ran thindist as its
	// DTLTO distributor (the link as the user ran it: Args only names the
	// job file), when it could be read.
	Linker []string  `json:"linker,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Error is how the run failed, "" when it succeeded.
	Error string `json:"error,omitempty"`
	// Log is what thindist printed (its messages and the summary; for
	// `thindist link` also the linker's), at most LogLimit bytes.
	Log string `json:"log,omitempty"`

	// Jobs is the number of local process slots; RemoteJobs the actions
	// in flight with a remote service (0 without --remote).
	Jobs       int    `json:"jobs"`
	RemoteJobs int    `json:"remote_jobs,omitempty"`
	Remote     string `json:"remote,omitempty"` // the service, when used
	// Invocation is the tool_invocation_id in the RequestMetadata of
	// every call to the service: what its pages list the run under.
	Invocation string `json:"invocation,omitempty"`
	// WorkerServer, when the run's workers were the per-user server's,
	// names it (its pid and socket, and whether this run started it).
	WorkerServer string `json:"worker_server,omitempty"`
	// LocalCache says whether the local cache was consulted; CacheLimit
	// is the size limit the run applied to it, in bytes.
	LocalCache bool  `json:"local_cache"`
	CacheLimit int64 `json:"cache_limit,omitempty"`
	// BytesUp and BytesDown are what the run sent to and received from
	// the remote service: the sums of its actions' (Action.BytesUp and
	// BytesDown), plus what failed or interrupted actions moved, which
	// is counted here alone.
	BytesUp   int64 `json:"bytes_up,omitempty"`
	BytesDown int64 `json:"bytes_down,omitempty"`
	// FellBack counts actions meant for the remote service that ran on
	// this machine instead.
	FellBack int64 `json:"fell_back,omitempty"`
	// Compression, with --remote-compress=auto, says what was chosen for
	// each direction and why (remote.Client.CompressionChoice).
	Compression string `json:"compression,omitempty"`
	// Toolchain, when the run shipped its compiler to the workers as
	// inputs (--remote-toolchain), is what that cost.
	Toolchain *Toolchain `json:"toolchain,omitempty"`

	// Ordered counts the actions whose order came from their recorded
	// time in earlier runs (the others by bitcode size).
	Ordered int `json:"ordered_by_history,omitempty"`

	// Phases are the stretches of the run's wall time it could see, in
	// order, some possibly before Start (the linker's work before it ran
	// thindist).
	Phases []Phase `json:"phases,omitempty"`

	// Commands are the distinct backend commands of the run, every path
	// named by its role ("<module>", "<import>", "<out>"); an action
	// refers to its own by index.
	Commands [][]string `json:"commands,omitempty"`
	// Contents maps each module a backend loaded, by name, to its content
	// digest (hex), or "absent".
	Contents map[string]string `json:"contents,omitempty"`
	Actions  []Action          `json:"actions"`
}

// Phase is a named stretch of the run's wall time.
type Phase struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Detail says more, as the summary line does: "420ms starting 1
	// fork server".
	Detail string `json:"detail,omitempty"`
}

// Where an action's result came from.
const (
	WhereLocalCache  = "cache"        // the local action cache
	WhereRemoteCache = "remote-cache" // the remote action cache
	WhereRemote      = "remote"       // executed by a remote worker
	WhereLocal       = "local"        // a compiler process on this machine
	WhereFailed      = "failed"       // the backend failed or could not run
	WhereStopped     = "stopped"      // interrupted
)

// Action is the record of one backend compilation.
type Action struct {
	// Module is the module compiled, named as a user knows it
	// ("libutil.a(checksum.o)"); ID is the name lld gave it, when that
	// differs (a temporary copy of an archive member).
	Module string `json:"module"`
	ID     string `json:"id,omitempty"`
	Output string `json:"output"`
	// Size is the module's bitcode size; ObjectSize the native object's.
	Size       int64  `json:"size"`
	ObjectSize int64  `json:"object_size,omitempty"`
	Where      string `json:"where"`
	// Forked: a local compiler forked from a fork server, not exec'd.
	// Worker: a thindist-worker compiled it, in-process. Read and set
	// both as the kind of runner, By and SetBy. NotWorker says why not
	// on a worker, when one was configured.
	Forked    bool   `json:"forked,omitempty"`
	Worker    bool   `json:"worker,omitempty"`
	NotWorker string `json:"not_worker,omitempty"`
	// Raced: a local and a remote execution ran at once; Where is the
	// winner.
	Raced bool `json:"raced,omitempty"`
	// Slot is the scheduler's slot that ran it.
	Slot int `json:"slot"`
	// Queued, Start and End are microseconds since the run's Start: when
	// the scheduler took the action up, when the execution that produced
	// its result began (after waiting for a process slot or an upload),
	// and when it ended.
	Queued int64 `json:"queued_us"`
	Begin  int64 `json:"start_us"`
	End    int64 `json:"end_us"`
	// CPU is the compiler's user+system time in microseconds (for a hit:
	// the original compile's, i.e. what the hit saved); MaxRSS its peak
	// resident set in bytes, when known (proc.Result.MaxRSS says what it
	// counts for exec'd and forked compilers).
	CPU    int64 `json:"cpu_us"`
	MaxRSS int64 `json:"max_rss,omitempty"`
	// BytesUp is what was uploaded to the remote service for it: its
	// inputs for remote execution, its outputs stored in the remote
	// cache. A blob is uploaded at most once per run and counts for the
	// action that needed it first (the one whose upload claimed it): a
	// blob several actions need, such as a module many import or the
	// compiler's command, counts for that one alone, and the other
	// actions count nothing for it. BytesDown is what was received for
	// it: blobs read (its outputs, stderr) and the contents inlined in
	// its action results. Both count every side that ran it, the loser
	// of a race included; 0 without --remote.
	BytesUp   int64 `json:"bytes_up,omitempty"`
	BytesDown int64 `json:"bytes_down,omitempty"`

	// Key is the cache key (the canonical action's digest, hex); the
	// fields after it are its parts, for explaining the next miss.
	Key      string   `json:"key,omitempty"`
	Content  string   `json:"content,omitempty"` // the module's own content digest
	Command  int      `json:"command"`
	Compiler string   `json:"compiler,omitempty"`
	Env      []string `json:"env,omitempty"`
	Platform string   `json:"platform,omitempty"`
	Index    string   `json:"index,omitempty"`
	// Order stands for the order in which the backend imports from its
	// modules (reapi.Parts.Order).
	Order string `json:"order,omitempty"`
	// Imports are the modules the backend may load besides its own, by
	// name; their contents are in Run.Contents.
	Imports []string `json:"imports,omitempty"`

	// NotCached is why the action was kept out of the caches ("not
	// cached: --save-temps writes side files"), when it was.
	NotCached string `json:"not_cached,omitempty"`
	// CacheError is why a cache's entry for the key could not be used
	// (a corrupt blob), when that is why it was compiled.
	CacheError string `json:"cache_error,omitempty"`
	// Miss says why a compiled action was not a cache hit: what differs
	// from the last record of the same module.
	Miss []string `json:"miss,omitempty"`
	// Error is the failure, for a failed action.
	Error string `json:"error,omitempty"`
}

// By is the kind of runner that ran a's compiler: as the record's forked
// and worker fields say for a compile here (ByExec when neither is set),
// ByNone for a result that came from elsewhere.
func (a *Action) By() proc.RunBy {
	switch {
	case a.Worker:
		return proc.ByWorker
	case a.Forked:
		return proc.ByForkServer
	case a.Where == WhereLocal:
		return proc.ByExec
	}
	return proc.ByNone
}

// SetBy records the kind of runner that ran a's compiler.
func (a *Action) SetBy(by proc.RunBy) {
	a.Forked, a.Worker = by == proc.ByForkServer, by == proc.ByWorker
}

// Compiled reports whether the action ran a compiler (was not a cache hit,
// did not fail).
func (a *Action) Compiled() bool { return a.Where == WhereLocal || a.Where == WhereRemote }

// Duration is the action's execution time.
func (a *Action) Duration() time.Duration { return time.Duration(a.End-a.Begin) * time.Microsecond }

// Wall is the run's wall time.
func (r *Run) Wall() time.Duration { return r.End.Sub(r.Start) }

// Name is what the run linked, for lists: its output, else its directory.
func (r *Run) Name() string {
	if r.Output != "" {
		return r.Output
	}
	return r.Dir
}

// Toolchain is a run's shipped compiler (--remote-toolchain=inputs): its
// distinct files and their size, what was uploaded for them (0 when the
// CAS had them all) and how long making them present took.
type Toolchain struct {
	Files    int           `json:"files"`
	Bytes    int64         `json:"bytes"`
	Uploaded int64         `json:"uploaded,omitempty"`
	Took     time.Duration `json:"took_ns,omitempty"`
}
