package reapisim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"

	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// simServer is a FakeServer whose Cluster is sim.
type simServer struct {
	*reapitest.FakeServer
	sim *Simulator
}

// startSim starts a FakeServer simulating sim (serving zstd if zstd) and a
// client of it.
func startSim(t *testing.T, zstd bool, sim Simulation) (simServer, *reapitest.Client) {
	t.Helper()
	m := New(sim, zstd)
	s, addr := reapitest.StartT(t, reapitest.Options{Zstd: zstd, Cluster: m})
	return simServer{FakeServer: s, sim: m}, reapitest.NewClient(t, addr)
}

// needShell skips a test that runs commands for real without /bin/sh.
func needShell(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skipf("/bin/sh not available: %v", err)
	}
}

// stampAction is an action whose output differs on every real execution
// (the time in nanoseconds) and that counts its real executions in counter,
// outside the execution root: a replay must return the recorded output and
// leave counter alone.
func stampAction(counter, salt string) reapitest.ActionSpec {
	return reapitest.ActionSpec{
		Args:    []string{"/bin/sh", "-c", "date +%s%N > out/stamp.txt && echo run >> " + counter},
		Outputs: []string{"out/stamp.txt"},
		Env:     map[string]string{"PATH": "/usr/bin:/bin"},
		Salt:    salt,
	}
}

func realRuns(t *testing.T, counter string) int {
	t.Helper()
	b, err := os.ReadFile(counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

func outputOf(t *testing.T, s *reapitest.FakeServer, resp *repb.ExecuteResponse) string {
	t.Helper()
	if resp.GetStatus().GetCode() != 0 || resp.GetResult().GetExitCode() != 0 || len(resp.GetResult().GetOutputFiles()) != 1 {
		t.Fatalf("execution failed: %v", resp)
	}
	b, ok := s.Blob(resp.GetResult().GetOutputFiles()[0].GetDigest())
	if !ok {
		t.Fatal("output not in the CAS")
	}
	return string(b)
}

// record runs the actions (salts) once for real in a recording simulation
// and saves the recording; it returns its path and each action's output.
func record(t *testing.T, counter string, salts ...string) (string, map[string]string) {
	t.Helper()
	s, c := startSim(t, false, Simulation{Record: true, Workers: 2})
	outs := map[string]string{}
	for _, salt := range salts {
		ad := stampAction(counter, salt).Build(t, c)
		outs[salt] = outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}))
	}
	if st := s.sim.Stats(); st.Recorded != int64(len(salts)) || st.Replayed != 0 {
		t.Fatalf("recording run: %+v, want %d recorded and none replayed", st, len(salts))
	}
	path := filepath.Join(t.TempDir(), "recording.json")
	if err := s.sim.Recording().Save(path); err != nil {
		t.Fatal(err)
	}
	return path, outs
}

func TestSimulationReplaysRecordedResults(t *testing.T) {
	needShell(t)
	counter := filepath.Join(t.TempDir(), "runs")
	path, outs := record(t, counter, "a", "b")
	if n := realRuns(t, counter); n != 2 {
		t.Fatalf("the recording run executed %d commands, want 2", n)
	}
	rec, err := LoadRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Len() != 2 {
		t.Fatalf("loaded %d recorded actions, want 2", rec.Len())
	}
	for _, d := range rec.CPUTimes() {
		if d <= 0 {
			t.Fatalf("recorded CPU times %v: want each above zero", rec.CPUTimes())
		}
	}

	// A fresh server (empty CAS and action cache), as a replay process
	// starts: the client uploads the inputs again and gets the recorded
	// output back, with no command run.
	s, c := startSim(t, false, Simulation{Recording: rec, Workers: 4, SlowFactor: 10})
	for _, salt := range []string{"a", "b"} {
		ad := stampAction(counter, salt).Build(t, c)
		if got := outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})); got != outs[salt] {
			t.Errorf("replay of %s returned %q, want the recorded %q", salt, got, outs[salt])
		}
	}
	if n := realRuns(t, counter); n != 2 {
		t.Fatalf("the replay executed %d commands, want none", n-2)
	}
	st := s.sim.Stats()
	if st.Replayed != 2 || st.Unrecorded != 0 || s.Stats().Executions != 0 {
		t.Fatalf("replay: %+v, %d executions; want 2 replayed, none run", st, s.Stats().Executions)
	}
	if st.Slowed != 1 {
		t.Fatalf("SlowFactor slowed %d executions, want exactly one (the longest recorded)", st.Slowed)
	}

	// An action the recording does not hold runs for real and joins it.
	ad := stampAction(counter, "c").Build(t, c)
	outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}))
	if st := s.sim.Stats(); st.Unrecorded != 1 || realRuns(t, counter) != 3 || rec.Len() != 3 {
		t.Fatalf("unrecorded action: %+v, %d runs, %d recorded; want it run once and recorded", st, realRuns(t, counter), rec.Len())
	}
}

func TestSimulationHonoursWorkerSlots(t *testing.T) {
	needShell(t)
	counter := filepath.Join(t.TempDir(), "runs")
	salts := []string{"a", "b", "c", "d", "e"}
	path, _ := record(t, counter, salts...)
	for _, workers := range []int{1, 2} {
		rec, err := LoadRecording(path)
		if err != nil {
			t.Fatal(err)
		}
		s, c := startSim(t, false, Simulation{Recording: rec, Workers: workers})
		ads := make([]*repb.Digest, len(salts))
		for i, salt := range salts {
			ads[i] = stampAction(counter, salt).Build(t, c)
		}
		var wg sync.WaitGroup
		metas := make([]*repb.ExecutedActionMetadata, len(ads))
		for i, ad := range ads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				metas[i] = c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).GetResult().GetExecutionMetadata()
			}()
		}
		wg.Wait()
		st := s.sim.Stats()
		if st.Replayed != int64(len(salts)) || st.PeakBusy < 1 || st.PeakBusy > int64(workers) {
			t.Fatalf("W=%d: %+v; want %d replayed, at most %d slots busy at once", workers, st, len(salts), workers)
		}
		// Whatever the timing, at no instant do more than W replays run.
		type event struct {
			at    time.Time
			delta int
		}
		var evs []event
		for _, m := range metas {
			evs = append(evs, event{m.GetExecutionStartTimestamp().AsTime(), +1}, event{m.GetExecutionCompletedTimestamp().AsTime(), -1})
		}
		for i := 1; i < len(evs); i++ {
			for j := i; j > 0 && (evs[j].at.Before(evs[j-1].at) || evs[j].at.Equal(evs[j-1].at) && evs[j].delta < evs[j-1].delta); j-- {
				evs[j], evs[j-1] = evs[j-1], evs[j]
			}
		}
		running := 0
		for _, e := range evs {
			if running += e.delta; running > workers {
				t.Fatalf("W=%d: %d replays ran at once (metadata %v)", workers, running, metas)
			}
		}
	}
}

func TestSimulationRoundTripAndLink(t *testing.T) {
	const rtt = 20 * time.Millisecond
	const bytesPerSecond = 1 << 20
	s, c := startSim(t, false, Simulation{Workers: 1, RTT: rtt, BytesPerSecond: bytesPerSecond})
	blob := make([]byte, 200<<10)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	start := time.Now()
	c.Upload(t, blob)
	took := time.Since(start)
	if _, err := c.CAS.FindMissingBlobs(t.Context(), &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{reapitest.DigestOf(blob)}}); err != nil {
		t.Fatal(err)
	}
	st := s.sim.Stats()
	var rpcs int64
	for _, n := range s.Stats().RPCs {
		rpcs += n
	}
	if st.RTTs != rpcs || rpcs != 2 {
		t.Fatalf("%d RPCs delayed by the round trip, of %d", st.RTTs, rpcs)
	}
	if st.BytesUp < int64(len(blob)) || st.BytesDown == 0 {
		t.Fatalf("link carried %d bytes up and %d down; want at least the blob's %d up and the replies down", st.BytesUp, st.BytesDown, len(blob))
	}
	// Lower bounds only (the simulation waits at least this long; the
	// machine may add any amount): one round trip and the blob's time on
	// the link.
	if min := rtt + time.Duration(float64(len(blob))/bytesPerSecond*float64(time.Second)); took < min {
		t.Fatalf("uploading %d bytes took %v, less than the round trip plus its time on the link (%v)", len(blob), took, min)
	}
}

// lld names the files of each link (archive members, index shards) after
// its process id: the same backend of the next link, with other names and
// a shard that records them, must replay the recorded result.
func TestSimulationKeyIgnoresPerLinkNames(t *testing.T) {
	needShell(t)
	counter := filepath.Join(t.TempDir(), "runs")
	backend := func(pid string) reapitest.ActionSpec {
		return reapitest.ActionSpec{
			Args: []string{"/bin/sh", "-c", `cat "$0" > out/stamp.txt && date +%s%N >> out/stamp.txt && echo run >> ` + counter,
				"m.o." + pid + ".o", "-fthinlto-index=m." + pid + ".thinlto.bc"},
			Outputs: []string{"out/stamp.txt"},
			Env:     map[string]string{"PATH": "/usr/bin:/bin"},
			Files: map[string]map[string]reapitest.InputFile{"": {
				"m.o." + pid + ".o":        {Data: []byte("the module\n")},
				"m." + pid + ".thinlto.bc": {Data: []byte("shard naming m.o." + pid + ".o\n")},
			}},
		}
	}
	s, c := startSim(t, false, Simulation{Record: true, Workers: 1})
	want := outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: backend("1234").Build(t, c)}))

	s, c = startSim(t, false, Simulation{Recording: s.sim.Recording(), Workers: 1})
	ad := backend("5678").Build(t, c)
	if got := outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})); got != want {
		t.Fatalf("the next link's backend returned %q, want the recorded %q", got, want)
	}
	if st := s.sim.Stats(); st.Replayed != 1 || st.Unrecorded != 0 || realRuns(t, counter) != 1 {
		t.Fatalf("%+v, %d real runs: want the recorded result replayed", st, realRuns(t, counter))
	}
	// Another module's contents is another action.
	other := backend("5678")
	other.Files[""]["m.o.5678.o"] = reapitest.InputFile{Data: []byte("another module\n")}
	outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: other.Build(t, c)}))
	if st := s.sim.Stats(); st.Unrecorded != 1 {
		t.Fatalf("%+v: a module with other contents was replayed", st)
	}
}

// A worker that sees only an action's command and its input root on disk
// (bench/replayworker, on a real cluster) finds the recorded result by
// ContentKey, in the recording split one file per action, whatever the
// index shard holds.
func TestRecordingSplitLookupByContentKey(t *testing.T) {
	needShell(t)
	data, shard := []byte("module bytes\n"), []byte("shard of link 1")
	spec := func(shard []byte) reapitest.ActionSpec {
		return reapitest.ActionSpec{
			// sh -c SCRIPT $0 $1...: the module is $0.
			Args:    []string{"/bin/sh", "-c", `cp "$0" out/o.txt`, "in.bc", "-fthinlto-index=.thindist/index.thinlto.bc", "-o", "out/o.txt"},
			WorkDir: "w",
			Outputs: []string{"out/o.txt"},
			Files: map[string]map[string]reapitest.InputFile{
				"w":           {"in.bc": {Data: data}},
				"w/.thindist": {"index.thinlto.bc": {Data: shard}},
			},
			Env: map[string]string{"PATH": "/usr/bin:/bin"},
		}
	}
	s, c := startSim(t, false, Simulation{Record: true, Workers: 1})
	outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: spec(shard).Build(t, c)}))
	dir := filepath.Join(t.TempDir(), "split")
	if err := s.sim.Recording().Split(dir); err != nil {
		t.Fatal(err)
	}

	// What the worker computes: every input file by its root-relative path,
	// a shard of another link included.
	files := map[string]string{
		"w/in.bc":                      reapitest.DigestKey(reapitest.DigestOf(data)),
		"w/.thindist/index.thinlto.bc": reapitest.DigestKey(reapitest.DigestOf([]byte("shard of link 2, other paths"))),
	}
	sp := spec(nil)
	key := ContentKey(nil, sp.Args, sp.WorkDir, files, sp.Outputs)
	rec, err := LoadRecording(filepath.Join(dir, key+".json"))
	if err != nil {
		t.Fatalf("the split recording has no file for the worker's key: %v", err)
	}
	ra, ok := rec.Lookup(key)
	if !ok {
		t.Fatal("Lookup: the action is not in its own file")
	}
	if ra.CPU <= 0 || len(ra.Result.GetOutputFiles()) != 1 {
		t.Fatalf("recorded action: CPU %s, outputs %v", ra.CPU, ra.Result.GetOutputFiles())
	}
	if got := string(ra.Blobs[reapitest.DigestKey(ra.Result.GetOutputFiles()[0].GetDigest())]); got != string(data) {
		t.Fatalf("recorded output %q, want %q", got, data)
	}

	// Another input is another action.
	files["w/in.bc"] = reapitest.DigestKey(reapitest.DigestOf([]byte("other module\n")))
	if other := ContentKey(nil, sp.Args, sp.WorkDir, files, sp.Outputs); other == key {
		t.Fatal("ContentKey ignores the module's content")
	}
}

// TestSimulationCancelFreesSlot: an operation its client gives up on (a
// race lost) frees its simulated worker slot at once, as a killed worker
// would, rather than holding it for the recorded time.
func TestSimulationCancelFreesSlot(t *testing.T) {
	counter, rec, _ := recordedA(t)
	// "a", the longest recorded, would hold the only slot for hours.
	s, c := startSim(t, false, Simulation{Recording: rec, Workers: 1, SlowFactor: 1e9})
	ad := stampAction(counter, "a").Build(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := c.Exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: ad})
	if err != nil {
		t.Fatal(err)
	}
	for {
		op, err := stream.Recv()
		if err != nil {
			t.Fatalf("before EXECUTING: %v", err)
		}
		if reapitest.StageOf(op) == repb.ExecutionStage_EXECUTING {
			break
		}
	}
	cancel()
	// "b" needs the slot: it runs (for real, unrecorded) only if the
	// cancelled "a" gave it back; else the test's deadline ends it.
	bd := stampAction(counter, "b").Build(t, c)
	outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: bd}))
	if st := s.sim.Stats(); st.Slowed != 1 || st.Unrecorded != 1 {
		t.Errorf("%+v: want a slowed and cancelled, b run", st)
	}
}

// A replay on a server that serves zstd hands out the recording's blobs
// compressed ahead of the replay (Recording.pack), not compressed again at
// every read, and they decompress to the recorded outputs.
func TestSimulationServesPackedBlobs(t *testing.T) {
	counter, rec, want := recordedA(t)
	s, c := startSim(t, true, Simulation{Recording: rec, Workers: 1})
	ad := stampAction(counter, "a").Build(t, c)
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})
	if got := outputOf(t, s.FakeServer, resp); got != want {
		t.Fatalf("replay returned %q, want the recorded %q", got, want)
	}
	d := resp.GetResult().GetOutputFiles()[0].GetDigest()
	packed := rec.actions[mustOne(t, rec)].packed
	if len(packed) == 0 {
		t.Fatal("the recording was not packed for a zstd server")
	}
	read, err := c.CAS.BatchReadBlobs(t.Context(), &repb.BatchReadBlobsRequest{
		Digests: []*repb.Digest{d}, AcceptableCompressors: []repb.Compressor_Value{repb.Compressor_ZSTD}})
	if err != nil {
		t.Fatal(err)
	}
	r := read.GetResponses()[0]
	if r.GetCompressor() != repb.Compressor_ZSTD || !bytes.Equal(r.GetData(), packed[0]) {
		t.Fatalf("read %d bytes (compressor %v), want the %d packed ahead of the replay", len(r.GetData()), r.GetCompressor(), len(packed[0]))
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	if plain, err := dec.DecodeAll(r.GetData(), nil); err != nil || string(plain) != want {
		t.Fatalf("the packed blob decompresses to %q (%v), want %q", plain, err, want)
	}
}

// mustOne returns the key of the recording's only action.
func mustOne(t *testing.T, r *Recording) string {
	t.Helper()
	if len(r.actions) != 1 {
		t.Fatalf("recording holds %d actions, want 1", len(r.actions))
	}
	for k := range r.actions {
		return k
	}
	return ""
}

// TestSimulationSlowSlotOnce: SlowFactor slows the slot the first
// execution of the longest action lands on; executing it again (a hedge)
// takes another slot, at the recorded speed.
func TestSimulationSlowSlotOnce(t *testing.T) {
	counter, rec, _ := recordedA(t)
	s, c := startSim(t, false, Simulation{Recording: rec, Workers: 2, SlowFactor: 2})
	ad := stampAction(counter, "a").Build(t, c)
	for i := 0; i < 3; i++ {
		outputOf(t, s.FakeServer, c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad, SkipCacheLookup: true}))
	}
	if st := s.sim.Stats(); st.Replayed != 3 || st.Slowed != 1 {
		t.Fatalf("%+v: want 3 replayed, the first of them slowed", st)
	}
}

// recordedA records action "a" once (record) and loads the recording, as
// a replay process does; it returns the action's run counter and its
// recorded output too.
func recordedA(t *testing.T) (string, *Recording, string) {
	t.Helper()
	needShell(t)
	counter := filepath.Join(t.TempDir(), "runs")
	path, outs := record(t, counter, "a")
	rec, err := LoadRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	return counter, rec, outs["a"]
}

// The link shares its capacity among the messages crossing it, frame by
// frame, as an HTTP/2 connection shares it among its streams: a small
// message sent while a large one crosses arrives long before the large
// one, not after it.
func TestSimulationLinkInterleavesMessages(t *testing.T) {
	l := &link{bytesPerSecond: 1 << 20}
	large, small := 1<<20, 2*linkFrame // one second, and 1/32 of it alone
	start := time.Now()
	largeDone := make(chan time.Duration, 1)
	go func() {
		l.transfer(context.Background(), large)
		largeDone <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	l.transfer(context.Background(), small)
	smallTook := time.Since(start)
	largeTook := <-largeDone
	if smallTook >= largeTook {
		t.Fatalf("the %d-byte message sent 100ms into a %d-byte one arrived after it (%v, the large one %v): the link carries whole messages in turn", small, large, smallTook, largeTook)
	}
	// Lower bounds only (the machine may add any amount): the large
	// message alone takes a second, and shared with the small one, its
	// frames' time on the link more.
	if min := time.Duration(float64(large+small) / l.bytesPerSecond * float64(time.Second)); largeTook < min {
		t.Fatalf("the large message took %v, less than the two messages' time on the link (%v)", largeTook, min)
	}
	if got := l.bytes.Load(); got != int64(large+small) {
		t.Fatalf("link counted %d bytes, want %d", got, large+small)
	}
}

// TestSimulationSlowdown: with Slowdown, every replay holds its slot at
// least Slowdown times the recorded time (a lower bound only: a sleep never
// ends early, but may end late on a busy machine).
func TestSimulationSlowdown(t *testing.T) {
	counter, rec, _ := recordedA(t)
	recorded := rec.CPUTimes()[0]
	const slowdown = 20
	s, c := startSim(t, false, Simulation{Recording: rec, Workers: 1, Slowdown: slowdown})
	ad := stampAction(counter, "a").Build(t, c)
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad, SkipCacheLookup: true})
	outputOf(t, s.FakeServer, resp)
	md := resp.GetResult().GetExecutionMetadata()
	held := md.GetExecutionCompletedTimestamp().AsTime().Sub(md.GetExecutionStartTimestamp().AsTime())
	if held < slowdown*recorded {
		t.Fatalf("the replay held its slot %v, want at least %d × the recorded %v", held, slowdown, recorded)
	}
	if st := s.sim.Stats(); st.Replayed != 1 || st.Slowed != 0 {
		t.Fatalf("%+v: want 1 replayed, none counted slowed (that is SlowFactor's slot)", st)
	}
}
