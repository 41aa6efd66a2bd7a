// Package server runs the benchmark's REAPI server, the test double or the
// cluster simulator, in a process of its own, and is the benchmark's handle
// on that process.
package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/thindist/thindist/internal/sys/procstart"
	"github.com/thindist/thindist/internal/testsupport/reapisim"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// The remote part runs the REAPI test double in a process of its own, as a
// real server would be: in the benchmark's process, its goroutines and
// garbage collector shared the Go runtime (and the benchmark's heap) with
// the measurement. The benchmark starts itself again with
// -serve-reapitest DIR; that process serves REAPI on loopback, prints its
// address, and answers one command per line on stdin with one JSON line:
//
//	stats    {"stats": reapitest.Stats, "uploads": [reapitest.UploadRecord],
//	          "simulation": reapisim.Stats}
//	reset    reapitest.FakeServer.ResetStats
//	inline   reapitest.FakeServer.SetInlineOutputs(true)
//
// and stops at the end of its input. With -simulate CONFIG (a simConfig in
// JSON) the server is the cluster simulation instead, and on
// stopping it saves the recording when it recorded anything.

// A Reply is the server process's answer to a command.
type Reply struct {
	Stats      reapitest.Stats          `json:"stats"`
	Uploads    []reapitest.UploadRecord `json:"uploads,omitempty"`
	Simulation reapisim.Stats           `json:"simulation"`
	Error      string                   `json:"error,omitempty"`
}

// Serve is the server process's main (-serve-reapitest execRoot):
// simulate is "" or a SimConfig in JSON; chroot (-serve-chroot) runs each
// command chrooted into its input root.
func Serve(execRoot, simulate string, chroot bool) error {
	opts := reapitest.Options{Zstd: true, ExecRootDir: execRoot, Chroot: chroot, ChrootEnv: chroot}
	var sc SimConfig
	var sim *reapisim.Simulator
	if simulate != "" {
		s, c, err := ParseSimConfig(simulate)
		if err != nil {
			return err
		}
		sc, sim = c, reapisim.New(*s, opts.Zstd)
		opts.Cluster = sim
	}
	if simulate != "" {
		warmHeap()
	}
	srv := reapitest.NewFakeServer(opts)
	addr, err := srv.Start(context.Background())
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := warmRPCs(addr); err != nil {
		return err
	}
	srv.ResetStats()
	if sc.Recording != "" {
		defer func() {
			if sim.Stats().Recorded > 0 {
				srv.Stop()
				if err := sim.Recording().Save(sc.Recording); err != nil {
					fmt.Fprintf(os.Stderr, "bench: REAPI simulation: %v\n", err)
				}
			}
		}()
	}
	out := json.NewEncoder(os.Stdout)
	fmt.Println(addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var r Reply
		switch cmd := strings.TrimSpace(in.Text()); cmd {
		case "stats":
			r.Stats, r.Uploads = srv.Stats(), srv.Uploads()
			if sim != nil {
				r.Simulation = sim.Stats()
			}
		case "reset":
			srv.ResetStats()
		case "inline":
			srv.SetInlineOutputs(true)
		default:
			r.Error = fmt.Sprintf("unknown command %q", cmd)
		}
		if err := out.Encode(&r); err != nil {
			return err
		}
	}
	return in.Err()
}

// warmHeap readies the simulated cluster's server process for a link the
// way a long-running server is: with memory the Go heap has already
// touched, and a GC target for a server rather than a short-lived tool.
// Started afresh for each link, the process faulted in every page its
// heap grew into while thindist was uploading, on the cores the two
// share: this machine maps fresh pages at about 0.5 GB/s, and that was a
// quarter of the simulation's CPU per action, taken from the link it
// measures.
func warmHeap() {
	debug.SetGCPercent(400)
	b := make([]byte, 256<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}

// warmRPCs makes the calls every link begins with once, from a client of
// its own, before the server's address is handed out: a service that has
// been running serves a link's first calls with its protobuf types, gRPC
// paths and goroutines ready, while this process, started afresh for each
// link, spent about 10 ms of the link's start on its first GetCapabilities
// alone (measured). The calls are then taken out of the server's counts.
func warmRPCs(addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); err != nil {
		return fmt.Errorf("warming the server: %w", err)
	}
	none := &repb.Digest{Hash: strings.Repeat("0", 64), SizeBytes: 1}
	if _, err := repb.NewContentAddressableStorageClient(conn).FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{none}}); err != nil {
		return fmt.Errorf("warming the server: %w", err)
	}
	// Not found, as a cold link's lookups are.
	repb.NewActionCacheClient(conn).GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: none})
	return nil
}

// A Proc is the benchmark's handle on the server process.
type Proc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	Addr string // where it serves REAPI
}

// Start starts the server process (the running executable, with
// -serve-reapitest execRoot, which must call Serve); simulate is "" or the
// simulation's configuration (SimConfig, JSON).
func Start(ctx context.Context, execRoot, simulate string) (*Proc, error) {
	return start(ctx, "-serve-reapitest", execRoot, "-simulate", simulate)
}

// StartChrooted starts the test double's process with chrooted workers
// (-serve-chroot): each command sees nothing but its input root, so only
// a compiler shipped as inputs runs there (reapitest.ChrootSupported
// says whether this machine can).
func StartChrooted(ctx context.Context, execRoot string) (*Proc, error) {
	return start(ctx, "-serve-reapitest", execRoot, "-serve-chroot")
}

func start(ctx context.Context, args ...string) (*Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, in: in, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("the REAPI test double did not start: %v", err)
	}
	p.Addr = strings.TrimSpace(line)
	return p, nil
}

// Call sends the process one command (stats, reset, inline) and returns
// its reply.
func (p *Proc) Call(cmd string) (Reply, error) {
	var r Reply
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return r, err
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, err
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

// Stats returns the server's counters and uploads.
func (p *Proc) Stats() (reapitest.Stats, []reapitest.UploadRecord, error) {
	r, err := p.Call("stats")
	return r.Stats, r.Uploads, err
}

// Stop ends the process (closing its input) and waits for it.
func (p *Proc) Stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-done
	}
}

// CPU is the server's CPU so far, its workers' (children it has waited
// for) included, from /proc/PID/stat: the benchmark does not count it as
// other processes' interference.
func (p *Proc) CPU() time.Duration {
	st, err := procstart.ReadStat(p.cmd.Process.Pid)
	if err != nil {
		return 0
	}
	d, _ := st.CPU(true)
	return d
}

// A SimConfig configures the simulation server process (-simulate, JSON).
type SimConfig struct {
	Recording     string        `json:"recording"` // loaded for a replay when it exists; saved when the server recorded anything
	Record        bool          `json:"record,omitempty"`
	Workers       int           `json:"workers"`
	RTT           time.Duration `json:"rtt,omitempty"`
	BitsPerSecond float64       `json:"bits_per_second,omitempty"`
	SlowFactor    float64       `json:"slow_factor,omitempty"`
	Slowdown      float64       `json:"slowdown,omitempty"`
}

// ParseSimConfig reads a SimConfig and the simulation it stands for,
// with its recording loaded for a replay.
func ParseSimConfig(s string) (*reapisim.Simulation, SimConfig, error) {
	var c SimConfig
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, c, fmt.Errorf("-simulate %q: %v", s, err)
	}
	sim := &reapisim.Simulation{Record: c.Record, Workers: c.Workers, RTT: c.RTT,
		BytesPerSecond: c.BitsPerSecond / 8, SlowFactor: c.SlowFactor, Slowdown: c.Slowdown}
	if !c.Record && c.Recording != "" {
		rec, err := reapisim.LoadRecording(c.Recording)
		if err != nil {
			return nil, c, err
		}
		sim.Recording = rec
	}
	return sim, c, nil
}
