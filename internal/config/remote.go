package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/observe/redact"
)

// Remote is the remote execution and remote cache configuration.
type Remote struct {
	// Target is grpc://HOST:PORT or grpcs://HOST:PORT; "" turns remote off.
	Target   string
	Instance string
	CA       string
	Cert     string
	Key      string
	Headers  KVList
	Platform KVList
	// Compiler is the compiler's path on the workers ("" = the local path).
	Compiler string
	// Toolchain is how the workers get the compiler: "inputs" (shipped
	// with each action), "installed" (theirs; also "", a Remote not made
	// from the settings) or "auto" (ShipsToolchain).
	Toolchain string
	// Jobs is how many actions are in flight with a remote service.
	Jobs int
	// Fallback is "local" or "none".
	Fallback string
	// CacheOnly executes locally and only uses the remote cache.
	CacheOnly bool
	// Upload writes results built on this machine (hybrid local slots,
	// races won here, fallbacks, cache-only mode) to the remote cache, as
	// Bazel's --remote_upload_local_results does by default: otherwise
	// every other machine sharing the cache compiles them again.
	Upload bool
	// Timeout bounds each RPC and blob transfer; ExecTimeout bounds one
	// execution on a worker.
	Timeout, ExecTimeout time.Duration
	// QueueTimeout bounds how long an action may stay queued on the
	// service (0: no bound).
	QueueTimeout time.Duration
	// ExecStall bounds how long an action may stay executing on the
	// service when ExecTimeout is 0 (0: no bound); with ExecTimeout the
	// bound is ExecTimeout plus a grace period.
	ExecStall time.Duration
	// Attempts bounds the tries of an RPC or execution that fails
	// transiently.
	Attempts int
	// Compress is which blob transfers use zstd: "auto", "downloads",
	// "all" or "none".
	Compress string
	// BuildID names the build the link belongs to in every call's
	// RequestMetadata (correlated_invocations_id; Bazel's
	// --build_request_id); "" for none.
	BuildID string

	// cacheImplied: CacheOnly was set by Bazel's --remote_cache alone.
	cacheImplied bool
	// LocalJobs bounds the actions this machine compiles beside the
	// remote ones (hybrid execution); -1: Config.Jobs, 0: none (only
	// fallbacks).
	LocalJobs int
	// NoRace turns off racing: running a remote action locally as well
	// once nothing is left to start and a local slot is free.
	NoRace bool
	// NoHedge turns off hedging: running the critical actions (those
	// raced from the start) on a second worker as well.
	NoHedge bool
	// Group is the most small actions run as one remote execution (0 or
	// 1: none grouped).
	Group int
}

// KVList is a repeatable KEY=VALUE flag. From an environment variable it
// takes several pairs separated by commas or newlines.
type KVList [][2]string

func (l *KVList) String() string {
	if l == nil {
		return ""
	}
	var s []string
	for _, kv := range *l {
		s = append(s, kv[0]+"="+kv[1])
	}
	return strings.Join(s, ",")
}

// Set adds one KEY=VALUE pair.
func (l *KVList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*l = append(*l, [2]string{strings.TrimSpace(k), val})
	return nil
}

// Redacted shows the keys only, for headers that carry credentials.
func (l *KVList) Redacted() string {
	var s []string
	for _, kv := range *l {
		s = append(s, kv[0]+"="+redact.Mask)
	}
	return strings.Join(s, ",")
}

// SetList adds the pairs of an environment variable's value.
func (l *KVList) SetList(v string) error {
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' }) {
		if strings.TrimSpace(item) == "" {
			continue
		}
		if err := l.Set(strings.TrimSpace(item)); err != nil {
			return err
		}
	}
	return nil
}

// remoteFlagGroup is the help section of every --remote flag.
const remoteFlagGroup = "Remote execution (REAPI v2: Buildbarn, BuildBuddy, EngFlow, NativeLink)"

// register adds the remote flags to fs, in the order help lists them.
func (r *Remote) register(fs *FlagSet) {
	r.registerConnection(fs)
	r.registerExecution(fs)
	r.registerCaching(fs)
	r.registerCalls(fs)
	r.registerBazelAliases(fs)
}

// registerConnection adds the flags naming the service and how to reach
// it: its address, instance, TLS material and headers.
func (r *Remote) registerConnection(fs *FlagSet) {
	const g = remoteFlagGroup
	fs.Var(targetValue{r}, "remote", g, "grpc[s]://HOST:PORT",
		"run backends on this Remote Execution API v2 service and share results through its\n"+
			"ActionCache; grpcs:// uses TLS with the system roots unless --remote-ca is given.\n"+
			"Bazel's --remote_cache=URL uses the service as a cache only (--remote-cache-only),\n"+
			"unless --remote_executor names the same service")
	fs.String(&r.Instance, "remote-instance", g, "NAME", "", "the REAPI instance name")
	fs.String(&r.CA, "remote-ca", g, "FILE", "", "PEM root certificates for grpcs://")
	fs.String(&r.Cert, "remote-cert", g, "FILE", "", "PEM client certificate for mutual TLS")
	fs.String(&r.Key, "remote-key", g, "FILE", "", "PEM client key for mutual TLS")
	fs.Var(&r.Headers, "remote-header", g, "KEY=VALUE",
		"send this header with every call (repeatable), e.g. x-buildbuddy-api-key=...")
}

// registerExecution adds the flags saying where and how backends run: the
// workers' platform and compiler, the slots on each side, racing, hedging,
// grouping and the fallback.
func (r *Remote) registerExecution(fs *FlagSet) {
	const g = remoteFlagGroup
	fs.Var(&r.Platform, "remote-platform", g, "KEY=VALUE",
		"a platform property workers must match (repeatable), e.g. OSFamily=Linux,\n"+
			"container-image=docker://..., Pool=...")
	fs.String(&r.Compiler, "remote-compiler", g, "PATH", "",
		"the compiler's path on the workers (default: the same path as on this machine;\n"+
			"with --remote-toolchain=auto, naming it means the workers have their own)")
	fs.Choice(&r.Toolchain, "remote-toolchain", g, []string{"auto", "inputs", "installed"}, "auto",
		"how the workers get the compiler. inputs: its executable, shared libraries and\n"+
			"dynamic loader go with every action as inputs, stored once in the CAS (265 MiB, about 92 MiB\n"+
			"with zstd for Debian's clang 22), so any Linux worker of this machine's architecture\n"+
			"runs the very compiler of this machine, nothing installed. installed: the workers run\n"+
			"their own, at --remote-compiler or this machine's path. auto: inputs, unless\n"+
			"--remote-compiler is given; a compiler that cannot be shipped (a script) is run\n"+
			"as installed, with a warning")
	fs.Int(&r.Jobs, "remote-jobs", g, 256, 1,
		"keep at most N actions in flight with the remote service (each costs a goroutine\n"+
			"and a stream, no thread); this machine keeps compiling too (--remote-local-jobs).\n"+
			"REAPI servers report no worker count, so the default keeps 200+ workers busy")
	fs.IntWant(&r.LocalJobs, "remote-local-jobs", g, -1, -1, "a number of at least 0, or -1 for the value of --jobs",
		"with --remote, compile at most N actions on this machine beside the remote ones\n"+
			"(hybrid execution: each action goes to whichever side has a free slot, local\n"+
			"first, largest first). 0: only what the remote cannot run (fallbacks); results\n"+
			"compiled here are stored in the remote cache too (--remote-upload)")
	fs.DefaultText("remote-local-jobs", "--jobs")
	fs.Bool(&r.NoRace, "no-race", g, false,
		"do not race. By default the remote side's slots are taken first (unless an action\n"+
			"has waited 100 ms in the cluster's queue, and it is ranked after every action queued\n"+
			"there: each is sent with its rank as its priority) and this machine's race: an action long\n"+
			"enough to bound the link alone is compiled here as well from the start (once the\n"+
			"cluster is seen running more at once than this machine's slots), and a free local\n"+
			"slot takes the remote action whose result should come last (the newest still\n"+
			"queued on the cluster, else, once every action has started, the one running longest;\n"+
			"once the cluster has been slower per action than this machine, the one a run here\n"+
			"would beat by most, a stuck one first); the first good result is used and the other\n"+
			"run is cancelled, so one slow or stalled worker does not hold up the link. Local\n"+
			"tries run at nice 10")
	fs.Bool(&r.NoHedge, "no-hedge", g, false,
		"do not hedge. By default each action raced from the start (above; one at least,\n"+
			"even with --remote-local-jobs=0) also runs on a second worker at once, as an\n"+
			"uncached action (do_not_cache) that the server does not merge with the first, while\n"+
			"those second runs add at most 5% to the link's work: one slow worker, or this\n"+
			"machine's few busy cores, then do not hold up the link. The summary counts them\n"+
			"(\"hedged on a second worker\"). Off with --no-race too")
	fs.Int(&r.Group, "remote-group", g, 0, 0,
		"while all --remote-jobs executions are busy, send small backends (expected to take\n"+
			"200 ms or less by earlier runs' records, else modules of 32 KiB or less) waiting\n"+
			"for a slot up to N to one remote execution, run one after the other on one worker,\n"+
			"to save per-action overhead on links of thousands of tiny modules (up to N times\n"+
			"--remote-jobs actions are then in flight); each still gets its own result, cache\n"+
			"entry and error. Needs a POSIX /bin/sh on the workers and a server that lets\n"+
			"clients write its ActionCache. 0: off")
	fs.Choice(&r.Fallback, "remote-fallback", g, []string{"local", "none"}, "local",
		"when remote execution of an action fails (unavailable, timed out, no worker, a bad\n"+
			"result): compile it locally with a warning, or fail. A compile error on the worker\n"+
			"is final either way: the link fails with the worker's stderr")
}

// registerCaching adds the flags of the remote cache's use.
func (r *Remote) registerCaching(fs *FlagSet) {
	const g = remoteFlagGroup
	fs.Bool(&r.CacheOnly, "remote-cache-only", g, false,
		"compile locally; look results up in the remote cache, and store them there\n"+
			"(unless --remote-upload=false)")
	fs.Bool(&r.Upload, "remote-upload", g, true,
		"store results compiled on this machine (hybrid local slots, races won here, local\n"+
			"fallbacks, --remote-cache-only) in the remote cache, as Bazel does by default, so\n"+
			"that no other machine compiles them again; results of remote execution are stored\n"+
			"anyway. --remote-upload=false only reads (e.g. developers' machines of a team whose\n"+
			"cache only CI writes; the server may also refuse writes)")
}

// registerCalls adds the flags bounding, compressing, labelling and
// retrying the calls to the service.
func (r *Remote) registerCalls(fs *FlagSet) {
	const g = remoteFlagGroup
	fs.Duration(&r.Timeout, "remote-timeout", g, "DURATION", time.Minute, "bound each remote call and blob transfer")
	fs.Duration(&r.ExecTimeout, "remote-exec-timeout", g, "DURATION", 0,
		"bound one backend's execution on a worker (default: the server's limit); thindist\n"+
			"itself gives up on an action still executing 30s after this (a dead worker cannot\n"+
			"enforce it) and compiles it locally (or fails, per --remote-fallback)")
	fs.Duration(&r.QueueTimeout, "remote-queue-timeout", g, "DURATION", 2*time.Minute,
		"give up on remote execution of a backend that stays queued (no free worker) this\n"+
			"long, and compile it locally (or fail, per --remote-fallback); 0: wait as long as\n"+
			"the server keeps it")
	fs.Duration(&r.ExecStall, "remote-exec-stall", g, "DURATION", 5*time.Minute,
		"without --remote-exec-timeout: give up on remote execution of a backend that the\n"+
			"service reports executing for this long (its worker may have died: a server notices\n"+
			"only after a minute or more), and compile it locally (or fail, per\n"+
			"--remote-fallback); 0: wait as long as the server reports it executing")
	fs.Choice(&r.Compress, "remote-compress", g, []string{"auto", "downloads", "all", "none"}, "auto",
		"which blob transfers use zstd, where the server offers it. auto: each direction is\n"+
			"compressed when that is faster than sending: zstd's speed on this machine (timed\n"+
			"once on a module) against the throughput measured to and from the service (kept\n"+
			"per service in the cache directory, for the next link), decided for blobs under\n"+
			"and over 1 MiB; blobs under 64 KiB go as they are; a service not measured yet\n"+
			"gets downloads. downloads: outputs come compressed (the server compresses;\n"+
			"decompressing is cheap) and inputs go as they are. all: compress uploads too.\n"+
			"none: neither. `thindist report` says what auto chose and why")
	fs.String(&r.BuildID, "remote-build-id", g, "ID", "",
		"the build this link belongs to (e.g. a CI job's id), sent with every call as the\n"+
			"correlated_invocations_id of its RequestMetadata, as Bazel's --build_request_id:\n"+
			"the server sees the links of one build together (Buildbarn queues builds fairly,\n"+
			"then the links of a build). Each link is an invocation of its own either way\n"+
			"(tool_invocation_id, shown in the remote summary line)")
	fs.Int(&r.Attempts, "remote-retries", g, 10, 1,
		"try a call that fails transiently (Unavailable, ResourceExhausted, DeadlineExceeded)\n"+
			"at most N times, with exponential backoff, and for at most 30s")
}

// registerBazelAliases adds Bazel's spellings of the remote flags, so that
// a team's .bazelrc settings carry over.
func (r *Remote) registerBazelAliases(fs *FlagSet) {
	fs.Alias("remote_executor", "remote")
	fs.AliasValue("remote_cache", "remote", cacheTargetValue{r})
	fs.Alias("remote_instance_name", "remote-instance")
	fs.Alias("remote_header", "remote-header")
	fs.Alias("remote_timeout", "remote-timeout")
	fs.Alias("remote_upload_local_results", "remote-upload")
	fs.Alias("build_request_id", "remote-build-id")
}

// targetValue is --remote (Bazel's --remote_executor): execution and
// caching on one service.
type targetValue struct{ r *Remote }

func (v targetValue) String() string {
	if v.r == nil {
		return ""
	}
	return v.r.Target
}
func (v targetValue) Set(s string) error {
	if err := checkTarget(s); err != nil {
		return err
	}
	v.r.Target = s
	if v.r.cacheImplied {
		// Bazel's --remote_cache and --remote_executor naming one
		// service: execution is wanted after all.
		v.r.CacheOnly, v.r.cacheImplied = false, false
	}
	return nil
}

// checkTarget refuses a service address thindist cannot dial; "" (no
// remote service) is taken.
func checkTarget(s string) error {
	if s == "" {
		return nil
	}
	for _, scheme := range []string{"grpc://", "grpcs://"} {
		if host, ok := strings.CutPrefix(s, scheme); ok && host != "" {
			return nil
		}
	}
	return badValue(s, "grpc://HOST:PORT or grpcs://HOST:PORT")
}

// cacheTargetValue is Bazel's --remote_cache: the service is used as a
// cache only, unless --remote_executor names it too (thindist uses one
// service for both).
type cacheTargetValue struct{ r *Remote }

func (v cacheTargetValue) String() string { return targetValue(v).String() }
func (v cacheTargetValue) Set(s string) error {
	if err := checkTarget(s); err != nil {
		return err
	}
	switch {
	case v.r.Target == "":
		v.r.Target = s
		if !v.r.CacheOnly {
			v.r.CacheOnly, v.r.cacheImplied = true, true
		}
	case v.r.Target != s:
		return fmt.Errorf("thindist uses one service for execution and caching; --remote_cache %q differs from --remote %q", s, v.r.Target)
	}
	return nil
}

// Implies names the settings that Set also changed.
func (v cacheTargetValue) Implies() []string {
	if v.r.cacheImplied {
		return []string{"remote-cache-only"}
	}
	return nil
}

// ShipsToolchain reports whether actions carry the compiler as inputs
// (--remote-toolchain), and why, in a phrase.
func (r *Remote) ShipsToolchain() (bool, string) {
	switch r.Toolchain {
	case "inputs":
		return true, "--remote-toolchain=inputs"
	case "auto":
	default:
		return false, "--remote-toolchain=installed"
	}
	if r.Compiler != "" {
		return false, "--remote-compiler names the workers' own compiler (--remote-toolchain=auto)"
	}
	return true, "no --remote-compiler names a compiler of the workers' own (--remote-toolchain=auto)"
}

// check validates what no single setting can: each setting's value is
// checked where it is set (values.go).
func (r *Remote) check() error {
	if (r.Cert == "") != (r.Key == "") {
		return fmt.Errorf("--remote-cert and --remote-key go together")
	}
	return nil
}

// Secrets returns the credentials the configuration holds (the values of
// --remote-header), for redacting them wherever they might be stored or
// shown (internal/observe/redact).
func (r *Remote) Secrets() []string {
	var s []string
	for _, kv := range r.Headers {
		s = append(s, kv[1])
	}
	return s
}
