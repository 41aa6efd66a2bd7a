package workerserver

import (
	"fmt"
	"strconv"
	"time"

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
// and, after "ok", its jobs one at a time:
//
//	["job", dir, argc, argv..., env...]
//	["outcome", elsewhere, rerun, status, peak RSS, CPU µs, stdout, stderr,
//	 started, recycled]
//
// (a worker.Outcome). A connection of another user is answered ["refused",
// why] whatever it sends.

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
