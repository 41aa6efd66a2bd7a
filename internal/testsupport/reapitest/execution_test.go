package reapitest

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

func needTools(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not available: %v", p, err)
		}
	}
}

func copyAction() ActionSpec {
	return ActionSpec{
		Args:    []string{"/bin/cp", "in.txt", "out/x.txt"},
		Outputs: []string{"out/x.txt"},
		Files:   map[string]map[string]InputFile{"": {"in.txt": {Data: []byte("hello thinlto\n")}}},
	}
}

func TestExecuteCopyReadBackAndCacheHit(t *testing.T) {
	needTools(t, "/bin/cp")
	s, c := startFake(t, Options{})
	ad := copyAction().Build(t, c)

	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})
	if resp.GetStatus().GetCode() != 0 {
		t.Fatalf("status %v", resp.GetStatus())
	}
	res := resp.GetResult()
	if resp.CachedResult || res.GetExitCode() != 0 {
		t.Fatalf("cached=%v exit=%d", resp.CachedResult, res.GetExitCode())
	}
	if len(res.OutputFiles) != 1 || res.OutputFiles[0].Path != "out/x.txt" {
		t.Fatalf("outputs %v", res.OutputFiles)
	}
	out := res.OutputFiles[0]
	data, err := c.read(t, "blobs/"+out.Digest.Hash+"/"+itoa(out.Digest.SizeBytes))
	if err != nil {
		t.Fatalf("Read output: %v", err)
	}
	if string(data) != "hello thinlto\n" {
		t.Fatalf("output %q", data)
	}
	if res.StdoutDigest == nil || res.StderrDigest == nil {
		t.Fatal("missing stdout/stderr digests")
	}
	if _, ok := s.Blob(res.StdoutDigest); !ok {
		t.Fatal("stdout not in CAS")
	}
	md := res.GetExecutionMetadata()
	if md.GetWorker() != WorkerName || md.GetExecutionStartTimestamp() == nil || md.GetExecutionCompletedTimestamp() == nil ||
		md.GetExecutionCompletedTimestamp().AsTime().Before(md.GetExecutionStartTimestamp().AsTime()) {
		t.Fatalf("bad metadata %v", md)
	}

	resp2 := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})
	if !resp2.CachedResult || !proto.Equal(resp2.Result.OutputFiles[0], out) {
		t.Fatalf("second Execute: cached=%v result=%v", resp2.CachedResult, resp2.Result)
	}
	ar, err := c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{ActionDigest: ad})
	if err != nil || !proto.Equal(ar.OutputFiles[0], out) {
		t.Fatalf("GetActionResult: %v %v", ar, err)
	}
	st := s.Stats()
	if st.Executions != 1 || st.ExecuteCalls != 2 || st.ACHits != 2 || st.ACMisses != 1 {
		t.Fatalf("stats %+v", st)
	}

	// skip_cache_lookup forces a real execution.
	resp3 := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad, SkipCacheLookup: true})
	if resp3.CachedResult || s.Stats().Executions != 2 {
		t.Fatalf("skip_cache_lookup: cached=%v executions=%d", resp3.CachedResult, s.Stats().Executions)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestExecuteEnvironmentIsExact(t *testing.T) {
	needTools(t, "/usr/bin/env")
	_, c := startFake(t, Options{})
	ad := ActionSpec{
		Args:  []string{"/usr/bin/env"},
		Env:   map[string]string{"A": "1", "THINDIST": "yes"},
		Files: map[string]map[string]InputFile{"": {"unused": {Data: []byte("x")}}},
	}.Build(t, c)
	res := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).GetResult()
	stdout, err := c.read(t, "blobs/"+res.StdoutDigest.Hash+"/"+itoa(res.StdoutDigest.SizeBytes))
	if err != nil {
		t.Fatal(err)
	}
	if string(stdout) != "A=1\nTHINDIST=yes\n" {
		t.Fatalf("env output %q", stdout)
	}
}

func TestExecuteInputTreeWorkingDirAndModes(t *testing.T) {
	needTools(t, "/bin/ls", "/bin/cp", "/usr/bin/test")
	_, c := startFake(t, Options{})
	files := map[string]map[string]InputFile{
		"":    {"a.txt": {Data: []byte("A")}},
		"sub": {"tool": {Data: []byte("#!/bin/false\n"), Exec: true}, "data": {Data: []byte("D")}},
	}
	links := map[string]map[string]string{"sub": {"link": "../a.txt"}}

	// Only declared inputs (plus output parents) exist in the fresh root.
	ls := ActionSpec{Args: []string{"/bin/ls", "-A", ".."}, WorkDir: "sub", Files: files, Links: links}.Build(t, c)
	res := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ls}).GetResult()
	out, _ := c.read(t, "blobs/"+res.StdoutDigest.Hash+"/"+itoa(res.StdoutDigest.SizeBytes))
	if string(out) != "a.txt\nsub\n" {
		t.Fatalf("root listing %q", out)
	}
	ls2 := ActionSpec{Args: []string{"/bin/ls", "-A"}, WorkDir: "sub", Files: files, Links: links}.Build(t, c)
	res = c.Execute(t, &repb.ExecuteRequest{ActionDigest: ls2}).GetResult()
	out, _ = c.read(t, "blobs/"+res.StdoutDigest.Hash+"/"+itoa(res.StdoutDigest.SizeBytes))
	if string(out) != "data\nlink\ntool\n" {
		t.Fatalf("sub listing %q", out)
	}

	for _, tc := range []struct {
		args []string
		exit int32
	}{
		{[]string{"/usr/bin/test", "-x", "tool"}, 0},
		{[]string{"/usr/bin/test", "-x", "data"}, 1},
		{[]string{"/usr/bin/test", "-L", "link"}, 0},
	} {
		ad := ActionSpec{Args: tc.args, WorkDir: "sub", Files: files, Links: links}.Build(t, c)
		if got := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).GetResult().GetExitCode(); got != tc.exit {
			t.Errorf("%v: exit %d, want %d", tc.args, got, tc.exit)
		}
	}

	// Outputs are relative to the working directory; the executable bit and
	// symlink-followed contents are reported; output directories come as Trees.
	cp := ActionSpec{
		Args:    []string{"/bin/cp", "-p", "tool", "link", "../out/"},
		WorkDir: "sub", Files: files, Links: links,
		Outputs: []string{"../out/tool"},
	}.Build(t, c)
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: cp})
	if resp.GetStatus().GetCode() != int32(codes.InvalidArgument) {
		t.Fatalf("escaping output path accepted: %v", resp.GetStatus())
	}
	cp = ActionSpec{
		Args:    []string{"/bin/cp", "-p", "tool", "link", "out/"},
		WorkDir: "sub", Files: files, Links: links,
		Outputs: []string{"out/tool", "out"},
	}.Build(t, c)
	res = c.Execute(t, &repb.ExecuteRequest{ActionDigest: cp}).GetResult()
	if res.GetExitCode() != 0 || len(res.OutputFiles) != 1 || !res.OutputFiles[0].IsExecutable || res.OutputFiles[0].Path != "out/tool" {
		t.Fatalf("result %v", res)
	}
	if len(res.OutputDirectories) != 1 {
		t.Fatalf("output directories %v", res.OutputDirectories)
	}
	treeBlob, err := c.read(t, "blobs/"+res.OutputDirectories[0].TreeDigest.Hash+"/"+itoa(res.OutputDirectories[0].TreeDigest.SizeBytes))
	if err != nil {
		t.Fatal(err)
	}
	tree := &repb.Tree{}
	if err := proto.Unmarshal(treeBlob, tree); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range tree.Root.Files {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "link,tool" || tree.Root.Files[0].Digest.Hash != DigestOf([]byte("A")).Hash {
		t.Fatalf("tree root %v", tree.Root)
	}
}

func TestExecuteTimeout(t *testing.T) {
	needTools(t, "/bin/sleep")
	_, c := startFake(t, Options{})
	ad := ActionSpec{Args: []string{"/bin/sleep", "20"}, Timeout: 200 * time.Millisecond,
		Files: map[string]map[string]InputFile{"": {"x": {Data: []byte("x")}}}}.Build(t, c)
	start := time.Now()
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})
	if resp.GetStatus().GetCode() != int32(codes.DeadlineExceeded) {
		t.Fatalf("status %v", resp.GetStatus())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout not honoured: took %v", d)
	}
}

func TestExecuteNotCachedOnFailureOrDoNotCache(t *testing.T) {
	needTools(t, "/bin/false", "/bin/cp")
	s, c := startFake(t, Options{})
	fail := ActionSpec{Args: []string{"/bin/false"}, Files: map[string]map[string]InputFile{"": {"x": {Data: []byte("x")}}}}.Build(t, c)
	for i := 0; i < 2; i++ {
		resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: fail})
		if resp.CachedResult || resp.Result.ExitCode != 1 {
			t.Fatalf("run %d: cached=%v exit=%d", i, resp.CachedResult, resp.Result.ExitCode)
		}
	}
	spec := copyAction()
	spec.DoNotCache = true
	dnc := spec.Build(t, c)
	for i := 0; i < 2; i++ {
		if resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: dnc}); resp.CachedResult {
			t.Fatalf("do_not_cache result served from cache")
		}
	}
	if got := s.Stats().Executions; got != 4 {
		t.Fatalf("executions %d, want 4", got)
	}
	if _, err := c.AC.GetActionResult(callContext(t), &repb.GetActionResultRequest{ActionDigest: fail}); err == nil {
		t.Fatal("failed action was cached")
	} else {
		wantCode(t, err, codes.NotFound)
	}
}

func TestExecutePlatformMismatchUnavailable(t *testing.T) {
	needTools(t, "/bin/cp")
	s, c := startFake(t, Options{Platform: map[string][]string{"OSFamily": {"linux"}, "pool": {"a", "b"}}})
	bad := copyAction()
	bad.Platform = map[string]string{"OSFamily": "windows"}
	stream, err := c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: bad.Build(t, c)})
	if err == nil {
		_, err = Drain(stream)
	}
	wantCode(t, err, codes.Unavailable)
	if s.Stats().Executions != 0 || s.Stats().ExecuteRejections != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
	good := copyAction()
	good.Platform = map[string]string{"OSFamily": "linux", "pool": "b"}
	if resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: good.Build(t, c)}); resp.Result.ExitCode != 0 {
		t.Fatalf("matching Platform: %v", resp)
	}
}

func TestExecuteMissingInputs(t *testing.T) {
	_, c := startFake(t, Options{})
	// Action blob absent: FAILED_PRECONDITION from the RPC.
	stream, err := c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: DigestOf([]byte("nope"))})
	if err == nil {
		_, err = Drain(stream)
	}
	wantCode(t, err, codes.FailedPrecondition)

	// Input file absent: FAILED_PRECONDITION in ExecuteResponse.status.
	dir := marshal(t, &repb.Directory{Files: []*repb.FileNode{{Name: "in.txt", Digest: DigestOf([]byte("never uploaded"))}}})
	cmd := marshal(t, &repb.Command{Arguments: []string{"/bin/cp", "in.txt", "x"}})
	action := marshal(t, &repb.Action{CommandDigest: DigestOf(cmd), InputRootDigest: DigestOf(dir)})
	c.Upload(t, dir, cmd, action)
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: DigestOf(action)})
	if resp.GetStatus().GetCode() != int32(codes.FailedPrecondition) {
		t.Fatalf("status %v", resp.GetStatus())
	}
}

func TestWaitExecutionUnknown(t *testing.T) {
	_, c := startFake(t, Options{})
	stream, err := c.Exec.WaitExecution(callContext(t), &repb.WaitExecutionRequest{Name: "operations/none"})
	if err == nil {
		_, err = Drain(stream)
	}
	wantCode(t, err, codes.NotFound)
}

// TestExecuteStagesAndExecutingFor: Execute streams report the stages an
// action goes through; ExecutingFor < 0 keeps it EXECUTING (a dead
// worker) until SetExecutingFor lets later executions through.
func TestExecuteStagesAndExecutingFor(t *testing.T) {
	needTools(t, "/bin/cp")
	s, c := startFake(t, Options{ExecutingFor: -1, ExecuteIgnoresActionCache: true})
	ad := copyAction().Build(t, c)
	ctx, cancel := context.WithCancel(callContext(t))
	stream, err := c.Exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: ad})
	if err != nil {
		t.Fatal(err)
	}
	var stages []repb.ExecutionStage_Value
	for len(stages) < 2 {
		op, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", stages, err)
		}
		if op.Done {
			t.Fatalf("a stalled execution finished: %v", op)
		}
		stages = append(stages, StageOf(op))
	}
	if stages[0] != repb.ExecutionStage_QUEUED || stages[1] != repb.ExecutionStage_EXECUTING {
		t.Fatalf("stages %v, want QUEUED, EXECUTING", stages)
	}
	got := make(chan error, 1)
	go func() { _, err := stream.Recv(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("the stalled stream went on: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	<-got
	if n := s.Stats().Executions; n != 0 {
		t.Fatalf("%d commands ran while the worker is dead", n)
	}

	s.SetExecutingFor(0)
	stream, err = c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: ad})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := Drain(stream)
	if err != nil {
		t.Fatal(err)
	}
	stages = nil
	for _, op := range ops {
		stages = append(stages, StageOf(op))
	}
	want := []repb.ExecutionStage_Value{repb.ExecutionStage_QUEUED, repb.ExecutionStage_COMPLETED}
	if len(stages) == 3 {
		want = []repb.ExecutionStage_Value{repb.ExecutionStage_QUEUED, repb.ExecutionStage_EXECUTING, repb.ExecutionStage_COMPLETED}
	}
	if !slices.Equal(stages, want) || !ops[len(ops)-1].Done {
		t.Fatalf("stages %v, want %v ending done", stages, want)
	}
	if res := Response(t, ops[len(ops)-1]).Result; res.ExitCode != 0 || len(res.OutputFiles) != 1 {
		t.Fatalf("result %v", res)
	}
}

// TestStopWaitsWhoeverCallsIt: a server started with a context stops when
// that context ends, and a Stop called meanwhile (a test's cleanup, right
// after t.Context() ended) returns only once running actions have finished
// and their execution directories are gone: it once returned at once, and
// the test's temporary directory could not be removed.
func TestStopWaitsWhoeverCallsIt(t *testing.T) {
	needTools(t, "/bin/sh", "/bin/sleep")
	roots := t.TempDir()
	s := NewFakeServer(Options{ExecRootDir: roots})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := NewClient(t, addr)
	// The shell's child keeps its output pipe open after the shell is
	// killed, so the action takes exec.Cmd's WaitDelay (2 s) to wind down:
	// long enough to see whether Stop waits for it.
	ad := ActionSpec{Args: []string{"/bin/sh", "-c", "sleep 30; :"},
		Files: map[string]map[string]InputFile{"": {"x": {Data: []byte("x")}}}}.Build(t, c)
	if _, err := c.Exec.Execute(callContext(t), &repb.ExecuteRequest{ActionDigest: ad}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ents, _ := os.ReadDir(roots); len(ents) > 0 && s.Stats().Executions > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the action did not start")
		}
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // let Start's watcher begin stopping first
	s.Stop()
	if ents, _ := os.ReadDir(roots); len(ents) != 0 {
		t.Fatalf("Stop returned with %d execution directories left", len(ents))
	}
}
