package workerserver

import (
	"fmt"
	"strconv"
	"time"

	"github.com/thindist/thindist/internal/local/forkserver"
	"github.com/thindist/thindist/internal/local/proc"
)

// The messages between a client and the server are worker.WriteMessage's.
// The client's first message is one of
//
//	["hello", link, identity...]  a link's; answered ["ok", pid],
//	                              ["stale", why] or ["refused", why]
//	["status"]                    answered ["status", JSON of Status]
//	["stop"]                      answered ["stopping", pid]
//
// and, after "ok", one request at a time: a job for a fork server
// (forks.go), answered with a forkserver.Status,
//
//	["fork", nice, dir, argc, argv..., env...]
//	["forked", elsewhere, exit code, signal, peak RSS, CPU µs, stdout, stderr]
//
// or a worker lent to run the link's jobs on (server.lend), the first
// job's command sent for its compiler to be checked:
//
//	["lease", dir, argc, argv..., env...]
//	["leased", pid, jobs left, started] + the worker's stdin and stdout
//	  (SCM_RIGHTS)
//	  or ["elsewhere", why]
//	... the link's jobs, on the worker's pipes (worker.Borrow) ...
//	["return", jobs run, peak RSS]   (no answer; the connection goes on)
//
// A connection of another user is answered ["refused", why] whatever it
// sends.

func forkRequest(c *proc.Cmd) []string {
	return appendCommand([]string{"fork", strconv.Itoa(c.Nice)}, c.Dir, c.Argv, c.Env)
}

func parseFork(f []string) (*proc.Cmd, error) {
	if len(f) < 2 || f[0] != "fork" {
		return nil, fmt.Errorf("a malformed fork request of %d fields", len(f))
	}
	nice, err := strconv.Atoi(f[1])
	if err != nil {
		return nil, fmt.Errorf("a malformed fork request: nice %q", f[1])
	}
	dir, argv, env, err := parseCommand("fork", f[2:])
	if err != nil {
		return nil, err
	}
	return &proc.Cmd{Nice: nice, Dir: dir, Argv: argv, Env: env}, nil
}

// appendCommand appends a command to the head of a request: its
// directory, argc, argv and environment.
func appendCommand(req []string, dir string, argv, env []string) []string {
	req = append(req, dir, strconv.Itoa(len(argv)))
	return append(append(req, argv...), env...)
}

// parseCommand reads what appendCommand wrote (f starts at the directory)
// in a request of kind.
func parseCommand(kind string, f []string) (dir string, argv, env []string, err error) {
	if len(f) < 2 {
		return "", nil, nil, fmt.Errorf("a malformed %s request of %d fields after its head", kind, len(f))
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 || 2+n > len(f) {
		return "", nil, nil, fmt.Errorf("a malformed %s request: argc %q of %d fields", kind, f[1], len(f))
	}
	return f[0], f[2 : 2+n], f[2+n:], nil
}

// forked is the answer to a fork request: elsewhere says why the job did
// not run to its end (run it another way), else st and the output are how
// it ended.
type forked struct {
	elsewhere      string
	st             forkserver.Status
	stdout, stderr []byte
}

func encodeForked(a forked) []string {
	return []string{"forked", a.elsewhere, strconv.Itoa(a.st.ExitCode), a.st.Signal, strconv.FormatInt(a.st.MaxRSS, 10),
		strconv.FormatInt(a.st.CPU.Microseconds(), 10), string(a.stdout), string(a.stderr)}
}

func decodeForked(f []string) (forked, error) {
	if len(f) != 8 || f[0] != "forked" {
		return forked{}, fmt.Errorf("a malformed answer of %d fields", len(f))
	}
	code, err1 := strconv.Atoi(f[2])
	rss, err2 := strconv.ParseInt(f[4], 10, 64)
	cpu, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return forked{}, fmt.Errorf("a malformed answer %q", f[:6])
	}
	return forked{elsewhere: f[1], st: forkserver.Status{ExitCode: code, Signal: f[3], MaxRSS: rss, CPU: time.Duration(cpu) * time.Microsecond},
		stdout: []byte(f[6]), stderr: []byte(f[7])}, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func returnRequest(jobs int, peak int64) []string {
	return []string{"return", strconv.Itoa(jobs), strconv.FormatInt(peak, 10)}
}

func parseReturn(f []string) (jobs int, peak int64, err error) {
	if len(f) != 3 || f[0] != "return" {
		return 0, 0, fmt.Errorf("a malformed return of a lent worker: %d fields, first %q", len(f), first(f))
	}
	jobs, err1 := strconv.Atoi(f[1])
	peak, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || jobs < 0 {
		return 0, 0, fmt.Errorf("a malformed return of a lent worker: %q", f)
	}
	return jobs, peak, nil
}

func first(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
