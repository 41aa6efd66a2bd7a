package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// fakeRemote starts a REAPI test double for the test.
var fakeRemote = reapitest.StartT

// remoteProgram is the program the remote tests link: plain objects and a
// regular archive (whose members' shards cannot be made stable).
func remoteProgram(t *testing.T) *testprog.Program {
	return program(t, testprog.Options{Modules: 6, ArchiveModules: 2, Seed: 7})
}

// copyProgram copies p's directory (sources, objects, archives) to a fresh
// directory: the same relative paths in another place.
func copyProgram(t *testing.T, p *testprog.Program) *testprog.Program {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "elsewhere", "checkout")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", p.Dir+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	q := *p
	q.Dir = dst
	for _, f := range []string{"prog-dtlto", "prog-inprocess"} {
		os.Remove(filepath.Join(dst, f))
	}
	return &q
}

// remoteOnly keeps every action remote (no hybrid local side), for tests
// that count what the server did. A later --remote-local-jobs wins.
const remoteOnly = "--remote-local-jobs=0"

// remoteLink links p through thindist on the server at addr and returns
// its stderr and error. Every action goes remote unless args say
// otherwise.
func remoteLink(t *testing.T, p *testprog.Program, addr string, args ...string) (string, error) {
	t.Helper()
	l := linkCmd{p: p, objs: p.Objects, out: "prog-dtlto", dist: thindist,
		distArgs: append([]string{"--no-cache", "--remote=grpc://" + addr, remoteOnly}, args...)}
	return l.run(t)
}

// wantCorrectOrFailed checks the invariant of every fault: the link either
// failed with a clear message, or produced a program that prints p.Want.
func wantCorrectOrFailed(t *testing.T, p *testprog.Program, stderr string, err error) bool {
	t.Helper()
	if err != nil {
		if !strings.Contains(stderr, "thindist: error:") {
			t.Errorf("the link failed without a thindist error message:\n%s", stderr)
		}
		if _, statErr := os.Stat(filepath.Join(p.Dir, "prog-dtlto")); statErr == nil {
			t.Errorf("a failed link left a program behind")
		}
		return false
	}
	if got := runProg(t, p, "prog-dtlto"); got != p.Want {
		t.Fatalf("WRONG PROGRAM: prints %q, want %q\n%s", got, p.Want, stderr)
	}
	return true
}

var remoteLine = regexp.MustCompile(`remote grpcs?://\S+ \(invocation [0-9a-f-]+\): (\d+) cache hits, (\d+) misses(?:; (\d+) executed, (\d+) server cache hits, (\d+) retries, (\d+) ran locally)?[^\n]*`)

type remoteSummary struct{ hits, misses, executed, serverHits, retries, local int }

func parseRemote(t *testing.T, stderr string) remoteSummary {
	t.Helper()
	m := remoteLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no remote summary line in:\n%s", stderr)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return remoteSummary{n(1), n(2), n(3), n(4), n(5), n(6)}
}

// TestRemoteLink: a link through the REAPI test double gives a program
// that behaves like the in-process one; a second link of the same files in
// another directory executes nothing; each blob is uploaded once.
func TestRemoteLink(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{Zstd: true, MaxBatchTotalSizeBytes: 4 << 10})
	stderr := checkBoth(t, p, linkCmd{distArgs: []string{"--no-cache", "--remote=grpc://" + addr, "--remote-fallback=none", remoteOnly}})
	st := srv.Stats()
	sum := parseRemote(t, stderr)
	jobs := len(p.Modules)
	if st.Executions != int64(jobs) || sum.executed != jobs || sum.local != 0 {
		t.Errorf("cold link: %d executions on the server, summary %+v; want %d remote executions\n%s", st.Executions, sum, jobs, stderr)
	}
	seen := map[string]int{}
	for _, u := range srv.Uploads() {
		seen[u.Hash]++
		if seen[u.Hash] == 2 {
			t.Errorf("blob %s/%d uploaded twice", u.Hash, u.SizeBytes)
		}
	}
	if st.RPCs[reapitest.MethodWrite] == 0 {
		t.Errorf("no ByteStream upload with a 4 KiB batch limit: %v", st.RPCs)
	}
	// The remote cache looks each action up; the executor does not look it
	// up again under its executable digest (issue 10, item 4).
	if n := st.RPCs[reapitest.MethodGetActionResult]; n != int64(jobs) {
		t.Errorf("cold link: %d GetActionResult calls for %d actions, want one each", n, jobs)
	}
	t.Logf("cold: %s", firstMatch(stderr))

	// The same relative paths elsewhere: everything hits.
	stderr, st = warmRelink(t, srv, p, addr)
	sum = parseRemote(t, stderr)
	if st.Executions != 0 || st.ExecuteCalls != 0 || sum.hits != jobs || st.BlobsUploaded != 0 {
		t.Errorf("warm link from another directory: %d executions, %d Execute calls, %d blobs uploaded, summary %+v; want %d cache hits and nothing else\n%s",
			st.Executions, st.ExecuteCalls, st.BlobsUploaded, sum, jobs, stderr)
	}
	t.Logf("warm: %s", firstMatch(stderr))
}

func firstMatch(s string) string { return remoteLine.FindString(s) }

// warmRelink links a copy of p (same relative paths, another directory)
// through the server again, checks the program and returns thindist's
// stderr and the server's counters for that link alone.
func warmRelink(t *testing.T, srv *reapitest.FakeServer, p *testprog.Program, addr string) (string, reapitest.Stats) {
	t.Helper()
	srv.ResetStats()
	q := copyProgram(t, p)
	stderr, err := remoteLink(t, q, addr, "--remote-fallback=none")
	if err != nil {
		t.Fatalf("warm link: %v\n%s", err, stderr)
	}
	wantCorrectOrFailed(t, q, stderr, nil)
	return stderr, srv.Stats()
}

var fallbackWarning = regexp.MustCompile(`compiling (it and the remaining actions )?locally`)

// TestRemoteFaults: every injected fault ends in a correct program or a
// clear failure, with either fallback.
func TestRemoteFaults(t *testing.T) {
	p := remoteProgram(t)
	type fault struct {
		name   string
		method string
		fault  reapitest.Fault
		n      int
		// recovers: the remote itself gets over it (retry, WaitExecution),
		// so even --remote-fallback=none links.
		recovers bool
	}
	faults := []fault{
		{"unavailable", reapitest.MethodExecute, reapitest.FaultUnavailable, 2, true},
		{"unavailable-always", reapitest.MethodExecute, reapitest.FaultUnavailable, 1000, false},
		{"deadline", reapitest.MethodExecute, reapitest.FaultDeadlineExceeded, 2, true},
		{"dropped-stream", reapitest.MethodExecute, reapitest.FaultDropExecuteStream, 3, true},
		{"broken-stream", reapitest.MethodExecute, reapitest.FaultBreakExecuteStream, 3, true},
		{"wrong-digest", reapitest.MethodExecute, reapitest.FaultWrongOutputDigest, 1, false},
		{"missing-output", reapitest.MethodExecute, reapitest.FaultMissingOutput, 1, false},
		{"escaping-output", reapitest.MethodExecute, reapitest.FaultEscapingOutputPath, 1, false},
		{"zero-byte-object", reapitest.MethodExecute, reapitest.FaultZeroByteOutput, 1, false},
		{"corrupt-batch-read", reapitest.MethodBatchReadBlobs, reapitest.FaultCorruptRead, 2, true},
		{"corrupt-stream-read", reapitest.MethodRead, reapitest.FaultCorruptRead, 2, true},
		{"upload-unavailable", reapitest.MethodBatchUpdateBlobs, reapitest.FaultUnavailable, 2, true},
		{"find-missing-deadline", reapitest.MethodFindMissingBlobs, reapitest.FaultDeadlineExceeded, 2, true},
	}
	// Every fault with every fallback, remote only and hybrid (this machine
	// compiles too) with and without races.
	modes := []struct {
		name string
		args []string
	}{{"remote-only", nil}, {"hybrid", []string{"--remote-local-jobs=2"}}, {"hybrid-no-race", []string{"--remote-local-jobs=2", "--no-race"}}}
	for _, f := range faults {
		for _, fallback := range []string{"local", "none"} {
			for _, mode := range modes {
				t.Run(f.name+"/"+fallback+"/"+mode.name, func(t *testing.T) {
					q := copyProgram(t, p)
					// Small batches so that objects are read with ByteStream.
					limit := int64(4 << 10)
					if f.method == reapitest.MethodRead {
						limit = 1 << 10 // every object is read with ByteStream
					}
					srv, addr := fakeRemote(t, reapitest.Options{MaxBatchTotalSizeBytes: limit})
					srv.InjectFault(f.method, f.fault, f.n)
					args := append([]string{"--remote-fallback=" + fallback, "--remote-retries=4"}, mode.args...)
					stderr, err := remoteLink(t, q, addr, args...)
					ok := wantCorrectOrFailed(t, q, stderr, err)
					switch {
					case fallback == "local" && !ok:
						t.Errorf("with --remote-fallback=local the link failed:\n%s", stderr)
					case fallback == "none" && f.recovers && !ok:
						t.Errorf("the client should get over %s by itself:\n%s", f.name, stderr)
					}
					// In hybrid mode the faulty call may not come: the
					// actions it would hit may have been compiled here.
					if mode.name == "remote-only" {
						if f.n < 1000 && srv.PendingFaults(f.method, f.fault) == f.n {
							t.Errorf("the fault never fired")
						}
						if fallback == "none" && !f.recovers && ok {
							t.Errorf("with --remote-fallback=none a faulty result was accepted:\n%s", stderr)
						}
						// A service that stays unavailable trips the
						// run-wide breaker: "compiling it and the remaining
						// actions locally".
						if fallback == "local" && !f.recovers && !fallbackWarning.MatchString(stderr) {
							t.Errorf("no warning about the local fallback:\n%s", stderr)
						}
					}
					if testing.Verbose() {
						t.Logf("%s", stderr)
					}
				})
			}
		}
	}
}

// TestRemotePlatformMismatch: a server without a worker for the platform
// answers Unavailable at once; the client gives up after its retries with
// a message naming the platform properties.
func TestRemotePlatformMismatch(t *testing.T) {
	p := remoteProgram(t)
	_, addr := fakeRemote(t, reapitest.Options{Platform: map[string][]string{"OSFamily": {"Linux"}}})
	stderr, err := remoteLink(t, p, addr, "--remote-fallback=none", "--remote-platform=OSFamily=Windows", "--remote-retries=2")
	if wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("the link succeeded without a matching worker:\n%s", stderr)
	}
	if !strings.Contains(stderr, "OSFamily=Windows") || !strings.Contains(stderr, "--remote-platform") {
		t.Errorf("the error does not name the platform:\n%s", stderr)
	}
	t.Logf("%s", stderr)
	stderr, err = remoteLink(t, p, addr, "--remote-platform=OSFamily=Linux", "--remote-fallback=none")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Errorf("matching platform: link failed:\n%s", stderr)
	}
}

// TestRemoteNoWorkerUnavailable: a server in its startup window answers an
// unmatched platform with Unavailable ("No workers exist ...", Buildbarn).
// The first actions try for their retries; then the run-wide breaker
// trips: one warning that keeps the --remote-platform hint, and the other
// actions compile locally without calling Execute (or all fail with
// --remote-fallback=none).
func TestRemoteNoWorkerUnavailable(t *testing.T) {
	p := remoteProgram(t)
	jobs := len(p.Modules)
	const remoteJobs, retries = 2, 4
	for _, fallback := range []string{"local", "none"} {
		t.Run(fallback, func(t *testing.T) {
			q := copyProgram(t, p)
			srv, addr := fakeRemote(t, reapitest.Options{Platform: map[string][]string{"OSFamily": {"Linux"}}})
			stderr, err := remoteLink(t, q, addr, "--remote-fallback="+fallback, "--remote-platform=OSFamily=Windows",
				"--remote-jobs="+strconv.Itoa(remoteJobs), "--remote-retries="+strconv.Itoa(retries))
			ok := wantCorrectOrFailed(t, q, stderr, err)
			if ok != (fallback == "local") {
				t.Errorf("--remote-fallback=%s: linked %v\n%s", fallback, ok, stderr)
			}
			// Only the actions in flight when the breaker trips have
			// called Execute, each at most --remote-retries times.
			if n := srv.Stats().ExecuteCalls; n == 0 || n > remoteJobs*retries {
				t.Errorf("%d Execute calls for %d actions, want at most %d (the %d in flight, %d attempts each)",
					n, jobs, remoteJobs*retries, remoteJobs, retries)
			}
			if n := strings.Count(stderr, "--remote-platform"); n != 1 {
				t.Errorf("the platform hint is printed %d times, want once:\n%s", n, stderr)
			}
			if !strings.Contains(stderr, "OSFamily=Windows") {
				t.Errorf("the properties sent are not named:\n%s", stderr)
			}
			if fallback == "local" {
				if n := strings.Count(stderr, "thindist: warning:"); n != 1 {
					t.Errorf("%d warnings, want 1:\n%s", n, stderr)
				}
				if sum := parseRemote(t, stderr); sum.local != jobs {
					t.Errorf("summary %+v, want all %d compiled locally\n%s", sum, jobs, stderr)
				}
			}
			t.Logf("%s", stderr)
		})
	}
}

// TestRemoteNoWorkerFailedPrecondition: a server past its startup window
// answers an unmatched platform with FailedPrecondition without missing
// blobs (Buildbarn). That is no reason to upload again: the run stops
// sending actions (circuit breaker) and names the platform.
func TestRemoteNoWorkerFailedPrecondition(t *testing.T) {
	p := remoteProgram(t)
	jobs := len(p.Modules)
	for _, fallback := range []string{"local", "none"} {
		t.Run(fallback, func(t *testing.T) {
			q := copyProgram(t, p)
			srv, addr := fakeRemote(t, reapitest.Options{Platform: map[string][]string{"OSFamily": {"Linux"}},
				NoWorkerFailedPrecondition: true})
			stderr, err := remoteLink(t, q, addr, "--remote-fallback="+fallback, "--remote-platform=OSFamily=Windows")
			ok := wantCorrectOrFailed(t, q, stderr, err)
			if ok != (fallback == "local") {
				t.Errorf("--remote-fallback=%s: linked %v\n%s", fallback, ok, stderr)
			}
			st := srv.Stats()
			if st.ExecuteCalls > int64(jobs) || st.ExecuteCalls == 0 {
				t.Errorf("%d Execute calls for %d actions: want each at most once, none retried", st.ExecuteCalls, jobs)
			}
			seen := map[string]bool{}
			for _, u := range srv.Uploads() {
				if seen[u.Hash] {
					t.Errorf("blob %s uploaded again", u.Hash)
				}
				seen[u.Hash] = true
			}
			if !strings.Contains(stderr, "OSFamily=Windows") || !strings.Contains(stderr, "--remote-platform") {
				t.Errorf("no platform hint:\n%s", stderr)
			}
			if n := strings.Count(stderr, "--remote-platform"); n != 1 {
				t.Errorf("the platform hint is printed %d times, want once:\n%s", n, stderr)
			}
			t.Logf("%s", stderr)
		})
	}
}

// TestRemoteHeadersInstanceTLS: headers and the instance name reach the
// server, over mutual TLS.
func TestRemoteHeadersInstanceTLS(t *testing.T) {
	p := remoteProgram(t)
	certs, err := reapitest.NewTestCerts()
	if err != nil {
		t.Fatal(err)
	}
	files, err := certs.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := certs.ServerTLSConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := fakeRemote(t, reapitest.Options{TLS: tlsCfg})
	base := []string{"--no-cache", "--remote=grpcs://" + addr, "--remote-ca=" + files.CACert, "--remote-fallback=none", remoteOnly,
		"--remote-instance=team/linux", "--remote-header=x-buildbuddy-api-key=sekrit", "--remote-header=X-Other=1"}
	l := linkCmd{p: p, objs: p.Objects, out: "prog-dtlto", dist: thindist,
		distArgs: append(base, "--remote-cert="+files.ClientCert, "--remote-key="+files.ClientKey)}
	stderr, err := l.run(t)
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("mTLS link failed:\n%s", stderr)
	}
	if v := srv.HeaderValues("x-buildbuddy-api-key"); len(v) == 0 || v[0] != "sekrit" {
		t.Errorf("API key header: %q", v)
	}
	if v := srv.HeaderValues("x-other"); len(v) == 0 {
		t.Errorf("second header missing")
	}
	found := false
	for _, n := range srv.InstanceNames() {
		found = found || n == "team/linux"
	}
	if !found {
		t.Errorf("instance names seen: %q", srv.InstanceNames())
	}
	if srv.Stats().Executions == 0 {
		t.Errorf("nothing executed remotely")
	}
	// Without a client certificate the handshake fails: a clear error.
	os.Remove(filepath.Join(p.Dir, "prog-dtlto"))
	l.distArgs = base
	stderr, err = l.run(t)
	if wantCorrectOrFailed(t, p, stderr, err) {
		t.Errorf("linked without a client certificate")
	}
}

// TestRemoteCacheOnly: --remote-cache-only compiles locally, stores (by
// default, as Bazel's --remote_upload_local_results), and a link elsewhere
// then compiles nothing; --remote-upload=false only reads.
func TestRemoteCacheOnly(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-cache-only")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatal(stderr)
	}
	st := srv.Stats()
	jobs := len(p.Modules)
	if st.Executions != 0 || st.ACUpdates != int64(jobs) {
		t.Errorf("cache-only upload: %d executions, %d AC updates; want 0 and %d", st.Executions, st.ACUpdates, jobs)
	}
	q := copyProgram(t, p)
	stderr, err = remoteLink(t, q, addr, "--remote-cache-only")
	wantCorrectOrFailed(t, q, stderr, err)
	if sum := parseRemote(t, stderr); sum.hits != jobs || sum.misses != 0 {
		t.Errorf("cache-only second link: %+v, want %d hits\n%s", sum, jobs, stderr)
	}
	// --remote-upload=false (and Bazel's spelling) stores nothing.
	for _, off := range []string{"--remote-upload=false", "--remote_upload_local_results=false"} {
		srv2, addr2 := fakeRemote(t, reapitest.Options{})
		r := copyProgram(t, p)
		stderr, err = remoteLink(t, r, addr2, "--remote-cache-only", off)
		wantCorrectOrFailed(t, r, stderr, err)
		if n := srv2.Stats().ACUpdates; n != 0 {
			t.Errorf("--remote-cache-only %s stored %d results", off, n)
		}
	}
}

// TestRemoteFallbackUpload: results compiled locally after remote
// execution failed reach the shared ActionCache unless --remote-upload=false;
// results of remote execution are stored either way.
func TestRemoteFallbackUpload(t *testing.T) {
	p := remoteProgram(t)
	jobs := len(p.Modules)
	for _, upload := range []bool{false, true} {
		q := copyProgram(t, p)
		srv, addr := fakeRemote(t, reapitest.Options{})
		srv.InjectFault(reapitest.MethodExecute, reapitest.FaultUnavailable, 1000)
		args := []string{"--remote-fallback=local", "--remote-retries=1"}
		if !upload {
			args = append(args, "--remote-upload=false")
		}
		stderr, err := remoteLink(t, q, addr, args...)
		if !wantCorrectOrFailed(t, q, stderr, err) {
			t.Fatal(stderr)
		}
		want := 0
		if upload {
			want = jobs
		}
		if n := srv.Stats().ACUpdates; n != int64(want) {
			t.Errorf("--remote-upload=%v: %d local fallback results stored in the remote ActionCache, want %d", upload, n, want)
		}
	}
	srv, addr := fakeRemote(t, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-fallback=none")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatal(stderr)
	}
	if n := srv.Stats().ACUpdates; n != int64(jobs) {
		t.Errorf("%d results of remote execution stored under the canonical key, want %d", n, jobs)
	}
}

// TestRemoteQueueTimeout: an action that stays QUEUED (no live worker) is
// given up after --remote-queue-timeout: compiled locally, or a clear
// failure with --remote-fallback=none.
func TestRemoteQueueTimeout(t *testing.T) {
	p := remoteProgram(t)
	for _, fallback := range []string{"local", "none"} {
		t.Run(fallback, func(t *testing.T) {
			q := copyProgram(t, p)
			srv, addr := fakeRemote(t, reapitest.Options{QueueFor: -1})
			start := time.Now()
			stderr, err := remoteLink(t, q, addr, "--remote-fallback="+fallback, "--remote-queue-timeout=300ms")
			ok := wantCorrectOrFailed(t, q, stderr, err)
			if ok != (fallback == "local") {
				t.Errorf("--remote-fallback=%s: linked %v\n%s", fallback, ok, stderr)
			}
			if !strings.Contains(stderr, "stayed queued") {
				t.Errorf("no word of the queue timeout:\n%s", stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the link took %v", d)
			}
			if st := srv.Stats(); st.ExecuteCalls != int64(len(p.Modules)) {
				t.Errorf("%d Execute calls for %d actions: a queue timeout is not retried", st.ExecuteCalls, len(p.Modules))
			}
		})
	}
}

// TestRemoteExecStall: a worker SIGKILLed mid-action leaves the action
// EXECUTING on the server (Buildbarn, until its scheduler drops the worker);
// thindist gives up on it after --remote-exec-stall: compiled locally with
// a warning naming the stage and the bound, or a clear failure with
// --remote-fallback=none.
func TestRemoteExecStall(t *testing.T) {
	p := remoteProgram(t)
	for _, fallback := range []string{"local", "none"} {
		t.Run(fallback, func(t *testing.T) {
			q := copyProgram(t, p)
			srv, addr := fakeRemote(t, reapitest.Options{ExecutingFor: -1})
			start := time.Now()
			stderr, err := remoteLink(t, q, addr, "--remote-fallback="+fallback, "--remote-exec-stall=300ms")
			ok := wantCorrectOrFailed(t, q, stderr, err)
			if ok != (fallback == "local") {
				t.Errorf("--remote-fallback=%s: linked %v\n%s", fallback, ok, stderr)
			}
			if !strings.Contains(stderr, "stayed EXECUTING on the server for more than 300ms (--remote-exec-stall)") {
				t.Errorf("no word of the stage and the bound:\n%s", stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the link took %v", d)
			}
			st := srv.Stats()
			if st.ExecuteCalls != int64(len(p.Modules)) || st.Executions != 0 {
				t.Errorf("%d Execute calls, %d executions for %d actions: a stall is not retried", st.ExecuteCalls, st.Executions, len(p.Modules))
			}
			if fallback == "local" {
				if sum := parseRemote(t, stderr); sum.local != len(p.Modules) {
					t.Errorf("summary %+v, want all %d compiled locally\n%s", sum, len(p.Modules), stderr)
				}
			}
			t.Logf("%s", stderr)
		})
	}
}

// TestRemoteFrontendRestart: the server goes away mid-link (in-flight
// calls break, new ones find the port closed) and comes back on the same
// port: the actions complete remotely, without falling back.
func TestRemoteFrontendRestart(t *testing.T) {
	p := remoteProgram(t)
	var srv *reapitest.FakeServer
	var once sync.Once
	bounced := make(chan error, 1)
	srv, addr := fakeRemote(t, reapitest.Options{
		Hook: func(method string, _ metadata.MD) error {
			if method == reapitest.MethodExecute {
				once.Do(func() { go func() { bounced <- srv.Bounce(700 * time.Millisecond) }() })
			}
			return nil
		},
		QueueFor: 300 * time.Millisecond, // actions are in flight when it goes
	})
	stderr, err := remoteLink(t, p, addr, "--remote-fallback=none")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("the link did not get over the restart:\n%s", stderr)
	}
	if err := <-bounced; err != nil {
		t.Fatal(err)
	}
	if sum := parseRemote(t, stderr); sum.executed+sum.serverHits != len(p.Modules) || sum.local != 0 {
		t.Errorf("summary %+v, want all %d executed remotely\n%s", sum, len(p.Modules), stderr)
	}
	t.Logf("%s", firstMatch(stderr))
}

// TestRemoteACReadOnly: a server that lets only workers write its
// ActionCache and never reads it in Execute (Buildbarn): a relink finds
// plain objects' results with GetActionResult of the executable action and
// executes only the archive members again; thindist does not try to write.
func TestRemoteACReadOnly(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{ACUpdateDisabled: true, ExecuteIgnoresActionCache: true})
	stderr, err := remoteLink(t, p, addr, "--remote-fallback=none")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatal(stderr)
	}
	if n := strings.Count(stderr, "update_enabled=false"); n != 1 {
		t.Errorf("%d notes about the read-only ActionCache, want 1:\n%s", n, stderr)
	}
	if st := srv.Stats(); st.RPCs[reapitest.MethodUpdateActionResult] != 0 {
		t.Errorf("%d UpdateActionResult calls to a server that refuses them", st.RPCs[reapitest.MethodUpdateActionResult])
	}
	srv.ResetStats()
	q := copyProgram(t, p)
	stderr, err = remoteLink(t, q, addr, "--remote-fallback=none")
	if !wantCorrectOrFailed(t, q, stderr, err) {
		t.Fatal(stderr)
	}
	// Only jobs whose shards name no archive member (whose names carry
	// lld's PID) have an executable action that repeats across links.
	sum := parseRemote(t, stderr)
	st := srv.Stats()
	if sum.serverHits == 0 || st.Executions != int64(len(p.Modules)-sum.serverHits) || st.ACUpdates != 0 {
		t.Errorf("relink: %d executions, %d AC updates, summary %+v; want results found with GetActionResult\n%s",
			st.Executions, st.ACUpdates, sum, stderr)
	}
	t.Logf("%s", firstMatch(stderr))
}

// TestRemoteCachedResultFaults: a bad entry in the remote ActionCache is
// never linked: the action runs again.
func TestRemoteCachedResultFaults(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-fallback=none")
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatal(stderr)
	}
	for _, f := range []reapitest.Fault{reapitest.FaultZeroByteOutput, reapitest.FaultWrongOutputDigest,
		reapitest.FaultMissingOutput, reapitest.FaultEscapingOutputPath} {
		t.Run(f.String(), func(t *testing.T) {
			q := copyProgram(t, p)
			srv.InjectFault(reapitest.MethodGetActionResult, f, 2)
			stderr, err := remoteLink(t, q, addr, "--remote-fallback=none")
			if !wantCorrectOrFailed(t, q, stderr, err) {
				t.Errorf("link failed:\n%s", stderr)
			}
			srv.ClearFaults()
		})
	}
}

// TestRemoteDoctor: doctor passes against the test double with the same
// clang, and fails clearly when the workers' compiler differs.
func TestRemoteDoctor(t *testing.T) {
	needClang(t)
	_, addr := fakeRemote(t, reapitest.Options{Zstd: true})
	dir := t.TempDir()
	code, out := runThindist(t, dir, nil, "doctor", "--remote=grpc://"+addr, "--compiler="+clang)
	if code != 0 || !strings.Contains(out, "all checks passed") || !strings.Contains(out, "clang version 22") ||
		!strings.Contains(out, "ok    fork server for") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
	t.Logf("%s", out)
	// Without --remote: the local checks only.
	code, out = runThindist(t, dir, nil, "doctor", "--compiler="+clang)
	if code != 0 || !strings.Contains(out, "ok    fork server for") || !strings.Contains(out, "skip  remote checks") {
		t.Errorf("doctor without --remote: exit %d\n%s", code, out)
	}
	other := filepath.Join(dir, "old-clang")
	os.WriteFile(other, []byte("#!/bin/sh\necho 'Debian clang version 19.1.7'\n"), 0o777)
	code, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://"+addr, "--compiler="+clang, "--remote-compiler="+other)
	if code != 1 || !strings.Contains(out, "same version") {
		t.Errorf("doctor with another compiler on the workers: exit %d\n%s", code, out)
	}
	// A frontend with a 2 MiB message limit it does not advertise and an
	// ActionCache only workers may write (stock Buildbarn).
	_, bbAddr := fakeRemote(t, reapitest.Options{MaxMessageSizeBytes: 2 << 20, ACUpdateDisabled: true})
	code, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://"+bbAddr, "--compiler="+clang)
	if code != 0 || !strings.Contains(out, "warn  the server does not let clients write its ActionCache") {
		t.Errorf("doctor against a Buildbarn-like server: exit %d\n%s", code, out)
	}
	// No local compiler and no --remote-compiler: nothing is sent to the
	// workers with an empty argv[0] (as a real Buildbarn showed).
	noSrv, noAddr := fakeRemote(t, reapitest.Options{})
	code, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://"+noAddr, "--compiler="+filepath.Join(dir, "no-such-clang"))
	if code != 1 || !strings.Contains(out, "skip  workers' compiler check") || noSrv.Stats().RPCs[reapitest.MethodExecute] != 0 {
		t.Errorf("doctor without a local compiler: exit %d, %d Execute calls\n%s", code, noSrv.Stats().RPCs[reapitest.MethodExecute], out)
	}
	code, out = runThindist(t, dir, nil, "doctor", "--remote=grpc://127.0.0.1:1", "--remote-retries=1")
	if code != 1 || !strings.Contains(out, "FAIL") {
		t.Errorf("doctor against nothing: exit %d\n%s", code, out)
	}
}

// TestRemoteInlineOutputs: against a server that inlines outputs in
// GetActionResult, a warm relink costs one call per action and reads no
// blob; inline contents that do not match their digest are never linked.
func TestRemoteInlineOutputs(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{InlineOutputs: true})
	if stderr, err := remoteLink(t, p, addr, "--remote-fallback=none"); err != nil {
		t.Fatalf("cold link: %v\n%s", err, stderr)
	}
	jobs := len(p.Modules)
	// Cold, the outputs come back inline in the Execute responses.
	if st := srv.Stats(); st.RPCs[reapitest.MethodBatchReadBlobs]+st.RPCs[reapitest.MethodRead] != 0 || st.Executions != int64(jobs) {
		t.Errorf("cold link: %d executions, blob reads with every output inlined: %v", st.Executions, st.RPCs)
	}

	stderr, st := warmRelink(t, srv, p, addr)
	if sum := parseRemote(t, stderr); sum.hits != jobs {
		t.Errorf("warm link: summary %+v, want %d cache hits\n%s", sum, jobs, stderr)
	}
	if n := st.RPCs[reapitest.MethodGetActionResult]; n != int64(jobs) {
		t.Errorf("warm link: %d GetActionResult calls, want %d (one per action)", n, jobs)
	}
	if n := st.RPCs[reapitest.MethodBatchReadBlobs] + st.RPCs[reapitest.MethodRead]; n != 0 {
		t.Errorf("warm link: %d blob reads with every output inlined, want 0: %v", n, st.RPCs)
	}

	// Every inlined object corrupt: each lookup misses (the contents do not
	// match their digest) and the backends run again; the program is right.
	srv.InjectFault(reapitest.MethodGetActionResult, reapitest.FaultCorruptInline, 1000)
	r := copyProgram(t, p)
	stderr, err := remoteLink(t, r, addr, "--remote-fallback=local")
	if !wantCorrectOrFailed(t, r, stderr, err) {
		t.Fatalf("the link failed on corrupt inline outputs instead of running the backends:\n%s", stderr)
	}
	if fired := 1000 - srv.PendingFaults(reapitest.MethodGetActionResult, reapitest.FaultCorruptInline); fired < jobs {
		t.Errorf("the corrupt-inline fault fired %d times, want at least %d", fired, jobs)
	}
	if sum := parseRemote(t, stderr); sum.hits != 0 {
		t.Errorf("%d cache hits served from corrupt inline contents\n%s", sum.hits, stderr)
	}
}

// TestRemoteCompileErrorIsFinal: a backend that fails on the worker (the
// compiler exits non-zero) fails the link, reported once with the worker's
// stderr and the command (once per failed action); it is not compiled
// again locally (issue 11, defect 4). The workers' compiler here is a script that always fails, so
// a local recompile would succeed and hide the failure.
func TestRemoteCompileErrorIsFinal(t *testing.T) {
	p := remoteProgram(t)
	failing := filepath.Join(t.TempDir(), "failing-clang")
	// It answers --version as the link's clang does (the link asks it
	// once, to warn if it is another), and fails every compile.
	script := "#!/bin/sh\ncase $1 in --version) exec " + clang + " --version;; esac\necho 'worker-side: error: unknown target CPU' >&2\nexit 1\n"
	if err := os.WriteFile(failing, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, addr := fakeRemote(t, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-compiler="+failing, "--remote-fallback=local")
	if wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("a compile error on the worker was hidden by a local recompile:\n%s", stderr)
	}
	if srv.Stats().Executions == 0 {
		t.Fatalf("nothing ran on the worker:\n%s", stderr)
	}
	if fallbackWarning.MatchString(stderr) {
		t.Errorf("the failure was treated as a remote failure and compiled locally:\n%s", stderr)
	}
	for _, want := range []string{"failed on a remote worker: exit status 1", "worker-side: error: unknown target CPU", "command (run in"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, stderr)
		}
	}
	if n, m := strings.Count(stderr, "worker-side: error"), strings.Count(stderr, "failed on a remote worker"); n != m {
		t.Errorf("the worker's stderr is shown %d times for %d failed actions, want once each:\n%s", n, m, stderr)
	}
}

// hybridLine reads the hybrid part of the remote summary line.
var hybridLine = regexp.MustCompile(`(\d+) compiled here beside the remote, (\d+) raced \((\d+) won here, \d+ raced from the start\)`)

func parseHybrid(t *testing.T, stderr string) (local, raced, wonHere int) {
	t.Helper()
	m := hybridLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no hybrid figures in the remote summary:\n%s", stderr)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return n(1), n(2), n(3)
}

// TestRemoteHybrid: with one slow worker slot, this machine compiles
// beside the cluster: both sides compile, and the program is right.
func TestRemoteHybrid(t *testing.T) {
	p := remoteProgram(t)
	for _, race := range []string{"--no-race=false", "--no-race"} {
		t.Run(race, func(t *testing.T) {
			q := copyProgram(t, p)
			srv, addr := fakeRemote(t, reapitest.Options{Workers: 1, ExecutingFor: 500 * time.Millisecond})
			stderr, err := remoteLink(t, q, addr, "--remote-local-jobs=2", "--remote-fallback=none", race)
			if !wantCorrectOrFailed(t, q, stderr, err) {
				t.Fatalf("link failed:\n%s", stderr)
			}
			// With races this machine's slots are the reserve: it
			// compiles what it races (and wins) once the cluster's slots
			// have taken the rest; without, it takes its share first.
			local, _, wonHere := parseHybrid(t, stderr)
			local += wonHere
			st := srv.Stats()
			// With races a slow remote execution may lose to this
			// machine and be cancelled before its worker starts it: then
			// the remote side was still sent actions.
			remote := st.Executions
			if race != "--no-race" {
				remote = st.ExecuteCalls
			}
			if remote == 0 || local == 0 {
				t.Errorf("%d remote executions (%d Execute calls), %d compiled here: want both sides to compile\n%s", st.Executions, st.ExecuteCalls, local, stderr)
			}
			noLeftovers(t, q.Dir)
			t.Logf("%s", firstMatch(stderr))
			// What this machine compiled was stored in the remote cache
			// too (--remote-upload is on by default): another machine's
			// link finds every result and executes nothing.
			srv.ResetStats()
			r := copyProgram(t, p)
			stderr, err = remoteLink(t, r, addr, "--remote-local-jobs=0", "--remote-fallback=none")
			if !wantCorrectOrFailed(t, r, stderr, err) {
				t.Fatalf("relink failed:\n%s", stderr)
			}
			if sum, st := parseRemote(t, stderr), srv.Stats(); sum.hits != len(p.Modules) || st.ExecuteCalls != 0 {
				t.Errorf("relink elsewhere: %+v, %d Execute calls; want %d remote cache hits and none\n%s",
					sum, st.ExecuteCalls, len(p.Modules), stderr)
			}
		})
	}
}

// TestRemoteRace: one action stalls on its worker (which would hold the
// link for --remote-exec-stall, 5 minutes by default); once everything
// else is done a local slot races it, the local run wins, the remote
// execution is cancelled (the server sees it), and exactly one result is
// linked.
func TestRemoteRace(t *testing.T) {
	p := remoteProgram(t)
	srv, addr := fakeRemote(t, reapitest.Options{})
	srv.StallNext(1)
	trace := filepath.Join(t.TempDir(), "trace.json")
	// --no-hedge: a second worker would catch the stalled action up too.
	stderr, err := remoteLink(t, p, addr, "--remote-local-jobs=1", "--remote-fallback=none", "--no-hedge", "--trace="+trace)
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("link failed:\n%s", stderr)
	}
	_, raced, wonHere := parseHybrid(t, stderr)
	if raced == 0 || wonHere == 0 {
		t.Errorf("%d raced, %d won here: want the stalled action won by this machine\n%s", raced, wonHere, stderr)
	}
	// The summary and the trace say who won.
	if !regexp.MustCompile(`\(\d+ raced, [1-9]\d* won here\)`).MatchString(stderr) {
		t.Errorf("the summary line does not say that a race was won here:\n%s", stderr)
	}
	if tr, err := os.ReadFile(trace); err != nil || !strings.Contains(string(tr), `"raced":"won by local"`) {
		t.Errorf("the trace does not say that the local run won (%v):\n%s", err, tr)
	} else {
		// The remote actions' steps are spans of their own.
		for _, step := range []string{"uploading inputs", "executing", "downloading outputs"} {
			if !strings.Contains(string(tr), `"name":"`+step+`"`) {
				t.Errorf("the trace has no %q step:\n%s", step, tr)
			}
		}
	}
	if n := srv.Stats().Cancellations; n == 0 {
		t.Errorf("the server saw no cancellation of the stalled execution")
	}
	noLeftovers(t, p.Dir)
	t.Logf("%s", firstMatch(stderr))
}

// TestRemoteRefusedFallsBack: a remote service whose host refuses the
// connection (nothing listens on its port) is given up at its first try,
// said so, and the link compiles locally (issue 48, item 8;
// internal/remote's TestDialRefusedNotRetried shows that no retry is
// scheduled).
func TestRemoteRefusedFallsBack(t *testing.T) {
	p := remoteProgram(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	stderr, err := remoteLink(t, p, addr)
	if !wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("the link failed against a closed port:\n%s", stderr)
	}
	if !strings.Contains(stderr, "nothing listens at "+addr+" (connection refused; not tried again)") ||
		!strings.Contains(stderr, "compiling locally") {
		t.Errorf("the link did not say that the connection was refused and that it compiles locally:\n%s", stderr)
	}
}

// TestRemoteWrongCompiler: workers whose compiler is another version of
// clang than the one that wrote the bitcode (--remote-compiler=clang-19
// on LLVM 22 bitcode; clang 19 exits 0 with an empty object on most of
// them, saying "Invalid summary version"). The link says so once, at its
// start, as `thindist doctor` would; every module fails alike, none is
// compiled here instead (the link would mix two compilers' objects);
// each error shows the command that ran, with clang 19, as run on the
// cluster; and the kept rerun.sh runs clang 19 and fails again (issue 48,
// item 3).
func TestRemoteWrongCompiler(t *testing.T) {
	const clang19 = "/usr/bin/clang-19"
	if _, err := os.Stat(clang19); err != nil {
		t.Skip("no clang 19")
	}
	p := remoteProgram(t)
	_, addr := fakeRemote(t, reapitest.Options{})
	stderr, err := remoteLink(t, p, addr, "--remote-compiler="+clang19, "--remote-fallback=local")
	if wantCorrectOrFailed(t, p, stderr, err) {
		t.Fatalf("the link succeeded with clang 19 on the workers:\n%s", stderr)
	}
	if n := strings.Count(stderr, "--remote-compiler: the workers' "+clang19+" reports"); n != 1 {
		t.Errorf("said %d times that the workers' compiler is not the link's, want once:\n%s", n, stderr)
	}
	if fallbackWarning.MatchString(stderr) {
		t.Errorf("modules were taken for remote failures and compiled locally:\n%s", stderr)
	}
	failed := regexp.MustCompile(`backend compilation of (\S+) failed on a remote worker`).FindAllStringSubmatch(stderr, -1)
	if len(failed) != len(p.Modules) {
		t.Errorf("%d modules failed, want every one of the %d alike:\n%s", len(failed), len(p.Modules), stderr)
	}
	if n := strings.Count(stderr, "input root, on the cluster):\n    "+clang19+" "); n != len(failed) {
		t.Errorf("%d of %d errors show the command run on the cluster with %s:\n%s", n, len(failed), clang19, stderr)
	}
	scripts := regexp.MustCompile(`to run it again: (\S+/rerun\.sh)`).FindAllStringSubmatch(stderr, -1)
	if len(scripts) == 0 {
		t.Fatalf("no rerun script named:\n%s", stderr)
	}
	for _, m := range scripts {
		text, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "exec "+clang19+" ") {
			t.Errorf("%s does not run the workers' compiler:\n%s", m[1], text)
		}
		b, err := exec.Command(m[1]).CombinedOutput()
		obj := filepath.Join(filepath.Dir(m[1]), "out", "0.o")
		if err == nil && executor.CheckObject(obj) == nil {
			t.Errorf("%s compiled a good object: it does not reproduce the failure\n%s\n%s", m[1], b, text)
		}
	}
	if testing.Verbose() {
		t.Logf("%s", stderr)
	}
}
