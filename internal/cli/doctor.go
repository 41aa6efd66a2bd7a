package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/remote"
)

const doctorUsage = `Usage:
  thindist doctor [--compiler CLANG] [--remote grpc[s]://HOST:PORT [--remote-* flags]]

Checks what a link would use, step by step, and says ok, skip or FAIL for
each (or warn): the local compiler (found, its version, whether thindist can fork it
from a fork server or must exec it); with --remote (or a remote in the config
file), the connection to the service, its capabilities (remote execution,
action cache writes, compression), a round trip through its CAS, and that its
workers' compiler reports the same version as the local one (ThinLTO backends
need the LLVM that wrote the index). Exit status 0 when every check passed, 1
otherwise.
`

func newDoctorFlags(cfg *config.Config, compiler *string) *config.FlagSet {
	fs := newFlags(cfg)
	fs.String(compiler, "compiler", "Doctor", "PATH", "",
		"the local compiler whose version the workers' must match (lld uses the clang that drives it)")
	fs.DefaultText("compiler", strings.Join(doctorCompilers, ", else ")+" (what scripts/install.sh installs)")
	fs.CommandOnly("compiler")
	return fs
}

func doctorHelp(w io.Writer) {
	var cfg config.Config
	var compiler string
	helpOwnFlags(w, doctorUsage, newDoctorFlags(&cfg, &compiler))
}

// doctorCmd runs `thindist doctor [--compiler CLANG] [--remote URL ...]`:
// the local compiler and whether it can be forked from a fork server; with
// --remote, connectivity, capabilities, a CAS round trip, and whether the
// workers' compiler reports the same version as the local one.
func doctorCmd(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
	var cfg config.Config
	var compiler string
	fs := newDoctorFlags(&cfg, &compiler)
	if code := parseFlags("thindist doctor", fs, &cfg, args, env, doctorHelp); code >= 0 {
		return code
	}
	r := &doctorReport{w: stdout, ok: true}
	var local, localVer string
	var execTook time.Duration
	var err error
	if compiler == "" {
		compiler, err = defaultCompiler(exec.LookPath)
	}
	if err == nil {
		local, localVer, execTook, err = localCompiler(ctx, compiler)
	}
	r.step(strings.TrimSpace("local compiler "+compiler), err, ": "+localVer)
	if err == nil {
		if cfg.NoForkServer {
			fmt.Fprintf(stdout, "skip  fork server (--no-fork-server)\n")
		} else {
			if detail, err := checkForkServer(ctx, &cfg, env, local, localVer, execTook); err != nil {
				// Not a failure: links exec the compiler instead.
				fmt.Fprintf(stdout, "warn  fork server for %s: %v; links will exec it (slower by the compiler's start-up)\n", local, err)
			} else {
				r.step("fork server for "+local, nil, detail)
			}
		}
	}

	if cfg.Remote.Target == "" {
		fmt.Fprintf(stdout, "skip  remote checks (no --remote)\n")
	} else {
		r.remoteChecks(ctx, &cfg.Remote, env, compiler, local, localVer)
	}
	if !r.ok {
		return 1
	}
	fmt.Fprintf(stdout, "all checks passed\n")
	return 0
}

// doctorCompilers are the compilers doctor checks without --compiler, the
// first found: clang on PATH, else the LLVM 22 the README has installed
// (scripts/install.sh: Debian's clang-22, whose unversioned commands are in
// /usr/lib/llvm-22/bin).
var doctorCompilers = []string{"clang", "clang-22", "/usr/lib/llvm-22/bin/clang"}

// defaultCompiler is the first of doctorCompilers that lookPath finds, or
// an error saying what to pass.
func defaultCompiler(lookPath func(string) (string, error)) (string, error) {
	for _, c := range doctorCompilers {
		if _, err := lookPath(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("none of %s found: pass --compiler CLANG, the clang your links use", strings.Join(doctorCompilers, ", "))
}

// doctorReport prints doctor's checks, one line each, and remembers
// whether one failed.
type doctorReport struct {
	w  io.Writer
	ok bool // no check failed
}

// step prints the check name as passed (with detail) or, when err is
// set, failed.
func (r *doctorReport) step(name string, err error, detail string) {
	if err != nil {
		r.ok = false
		fmt.Fprintf(r.w, "FAIL  %s: %v\n", name, err)
		return
	}
	fmt.Fprintf(r.w, "ok    %s%s\n", name, detail)
}

// localCompiler finds compiler on PATH and runs its --version: it returns
// its absolute path, the first line of what it printed, and how long a
// second, warm, run took (zero if that run failed).
func localCompiler(ctx context.Context, compiler string) (local, version string, execTook time.Duration, err error) {
	local, err = exec.LookPath(compiler)
	if err == nil {
		local, err = filepath.Abs(local)
	}
	if err != nil {
		return local, "", 0, err
	}
	cmd := &proc.Cmd{Argv: []string{local, "--version"}}
	res, err := proc.Exec{}.Run(ctx, cmd)
	if err == nil && res.Failed() {
		err = fmt.Errorf("%s --version: %s %s", local, res.Status(), bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return local, "", 0, err
	}
	version = remote.FirstLine(string(res.Stdout))
	// Timed again, warm, as the forked run is.
	if res, err := (proc.Exec{}).Run(ctx, cmd); err == nil {
		execTook = res.Wall
	}
	return local, version, execTook, nil
}

// remoteChecks connects to rc's server, prints its capabilities, checks a
// CAS round trip and, when it executes, the workers' compiler version
// against the local one (localVer, of compiler found at local).
func (r *doctorReport) remoteChecks(ctx context.Context, rc *config.Remote, env pipeline.Env, compiler, local, localVer string) {
	stdout := r.w
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	client, err := remote.Dial(dctx, pipeline.RemoteOptions(rc))
	cancel()
	r.step("connect to "+rc.Target+" and GetCapabilities", err, fmt.Sprintf(" (%v)", time.Since(start).Round(time.Millisecond)))
	if err != nil {
		return
	}
	defer client.Close()
	caps := client.Caps
	cc, ec := caps.GetCacheCapabilities(), caps.GetExecutionCapabilities()
	fmt.Fprintf(stdout, "      API %d.%d-%d.%d; digest functions %v; compression %s; batch limit %d bytes (server says %d)\n",
		caps.GetLowApiVersion().GetMajor(), caps.GetLowApiVersion().GetMinor(),
		caps.GetHighApiVersion().GetMajor(), caps.GetHighApiVersion().GetMinor(),
		cc.GetDigestFunctions(), client.Compression(), client.BatchLimit(), cc.GetMaxBatchTotalSizeBytes())
	fmt.Fprintf(stdout, "      ActionCache writes by clients: %v; remote execution: %v\n",
		cc.GetActionCacheUpdateCapabilities().GetUpdateEnabled(), ec.GetExecEnabled())

	if !client.ACUpdateEnabled() {
		fmt.Fprintf(stdout, "warn  the server does not let clients write its ActionCache: thindist cannot store results under\n"+
			"      its canonical key, so jobs of archive members (whose executable action changes with every link)\n"+
			"      are not reused across links; let thindist write the ActionCache to share them\n")
	}
	r.step("CAS upload, FindMissingBlobs and read back (a small and a 3 MiB blob)", client.CheckCAS(ctx), "")

	remoteCompiler := rc.Compiler
	if remoteCompiler == "" {
		remoteCompiler = local
	}
	switch {
	case rc.CacheOnly || !client.ExecEnabled():
		fmt.Fprintf(stdout, "skip  remote compiler check (no remote execution)\n")
	case remoteCompiler == "":
		// The local compiler was not found (a failure above): there is
		// no name to run on the workers, and an action with an empty
		// argv[0] would only fail there.
		fmt.Fprintf(stdout, "skip  workers' compiler check: no compiler to ask for (pass --compiler or --remote-compiler)\n")
	case r.shippedCompiler(ctx, rc, env, client, local, localVer):
	default:
		rex := remote.NewExecutor(client, remote.ExecOptions{Compiler: rc.Compiler, Platform: rc.Platform,
			Env: pipeline.RemoteEnv(env.Getenv), Timeout: rc.ExecTimeout, ExecStall: rc.ExecStall})
		remoteVer, err := rex.WorkersCompiler(ctx, remoteCompiler, compiler, localVer)
		r.step("workers' compiler "+remoteCompiler, err, ": "+remoteVer)
	}
}

// checkForkServer forks the compiler's --version from a fork server, as a
// link would, and compares what it prints with the exec'd run's first line.
func checkForkServer(ctx context.Context, cfg *config.Config, env pipeline.Env, compiler, want string, execTook time.Duration) (string, error) {
	dir := cfg.CacheDir
	if dir == "" {
		dir = config.DefaultCacheDir(env.Getenv)
	}
	var warned error
	pool, closePool := forkserver.NewPoolIn(dir, os.Environ(), func(format string, args ...any) {
		warned = fmt.Errorf(format, args...)
	})
	if pool == nil {
		return "", warned
	}
	defer closePool()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	st, err := pool.Run(ctx, forkserver.Job{Argv: []string{compiler, "--version"}, Dir: "/", Stdout: &stdout, Stderr: &stderr}, 5*time.Second)
	took := time.Since(start)
	switch {
	case err != nil:
		return "", err
	case st.ExitCode != 0 || st.Signal != "":
		return "", fmt.Errorf("forked %s --version: exit %d %s: %s", compiler, st.ExitCode, st.Signal, strings.TrimSpace(stderr.String()))
	case remote.FirstLine(stdout.String()) != want:
		return "", fmt.Errorf("forked %s --version printed %q, exec'd %q", compiler, remote.FirstLine(stdout.String()), want)
	}
	// The first fork also started the server; a second shows the cost of a job.
	start = time.Now()
	if _, err := pool.Run(ctx, forkserver.Job{Argv: []string{compiler, "--version"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard}, 5*time.Second); err == nil {
		took = time.Since(start)
	}
	return fmt.Sprintf(" (--version forked %v, exec'd %v)", took.Round(100*time.Microsecond), execTook.Round(100*time.Microsecond)), nil
}
