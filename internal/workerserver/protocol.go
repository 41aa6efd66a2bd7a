package workerserver

import (
	"fmt"
	"strconv"
	"time"

	"github.com/thindist/thindist/internal/forkserver"
	"github.com/thindist/thindist/internal/proc"
	"github.com/thindist/thindist/internal/worker"
)

// The messages between a client and the server are worker.WriteMessage's.
// The client's first message is one of
//
//	["hello", link, identity...]  a link's; answered ["ok", pid],
//	                              ["stale", why] or ["refused", why]
//	["status"]                    answered ["status", JSON of Status]
//	["stop"]                      answered ["stopping", pid]
//
// and, after "ok", its jobs one at a time, each for a worker or for a
// fork server (forks.go):
//
//	["job", dir, argc, argv..., env...]
//	["outcome", elsewhere, rerun, status, peak RSS, CPU µs, stdout, stderr,
//	 started, recycled]
//
//	["fork", nice, dir, argc, argv..., env...]
//	["forked", elsewhere, exit code, signal, peak RSS, CPU µs, stdout, stderr]
//
// (a worker.Outcome; a forkserver.Status). A connection of another user is
// answered ["refused", why] whatever it sends.

func jobRequest(dir string, argv, env []string) []string {
	req := make([]string, 0, 3+len(argv)+len(env))
	req = append(req, "job", dir, strconv.Itoa(len(argv)))
	return append(append(req, argv...), env...)
}

func parseJob(f []string) (dir string, argv, env []string, err error) {
	if len(f) < 3 || f[0] != "job" {
		return "", nil, nil, fmt.Errorf("a malformed job request of %d fields", len(f))
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 || 3+n > len(f) {
		return "", nil, nil, fmt.Errorf("a malformed job request: argc %q of %d fields", f[2], len(f))
	}
	return f[1], f[3 : 3+n], f[3+n:], nil
}

func forkRequest(c *proc.Cmd) []string {
	req := make([]string, 0, 4+len(c.Argv)+len(c.Env))
	req = append(req, "fork", strconv.Itoa(c.Nice), c.Dir, strconv.Itoa(len(c.Argv)))
	return append(append(req, c.Argv...), c.Env...)
}

func parseFork(f []string) (*proc.Cmd, error) {
	if len(f) < 4 || f[0] != "fork" {
		return nil, fmt.Errorf("a malformed fork request of %d fields", len(f))
	}
	nice, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || n < 1 || 4+n > len(f) {
		return nil, fmt.Errorf("a malformed fork request: nice %q, argc %q of %d fields", f[1], f[3], len(f))
	}
	return &proc.Cmd{Nice: nice, Dir: f[2], Argv: f[4 : 4+n], Env: f[4+n:]}, nil
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

func encodeOutcome(o *worker.Outcome) []string {
	return []string{"outcome", o.Elsewhere, o.Rerun, strconv.Itoa(o.Status), strconv.FormatInt(o.MaxRSS, 10),
		strconv.FormatInt(o.CPU.Microseconds(), 10), string(o.Stdout), string(o.Stderr), flag(o.Started), flag(o.Recycled)}
}

func decodeOutcome(f []string) (*worker.Outcome, error) {
	if len(f) != 10 || f[0] != "outcome" {
		return nil, fmt.Errorf("a malformed answer of %d fields", len(f))
	}
	status, err1 := strconv.Atoi(f[3])
	rss, err2 := strconv.ParseInt(f[4], 10, 64)
	cpu, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, fmt.Errorf("a malformed answer %q", f[:6])
	}
	return &worker.Outcome{Elsewhere: f[1], Rerun: f[2], Status: status, MaxRSS: rss, CPU: time.Duration(cpu) * time.Microsecond,
		Stdout: []byte(f[6]), Stderr: []byte(f[7]), Started: f[8] == "1", Recycled: f[9] == "1"}, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
