// Package floor measures the transport's floor for the benchmark's cluster
// part: what bare REAPI calls, and bare cold actions, cost a plain grpc-go
// client's CPU on this machine.
package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/thindist/thindist/bench/internal/server"
)

// The transport's floor: what one REAPI call costs a client's CPU on this
// machine when the client does nothing else. thindist's CPU per remote
// action (the cluster simulation's column, ≤ 0.5 ms wanted) pays for four
// or five calls an action besides its hashing and file I/O, so this floor
// says how much of that figure any grpc-go client would spend here. The
// client is a process of its own (this benchmark started again with
// -rpc-floor-client ADDR): plain grpc-go over the official protos, no
// thindist code, against the REAPI test double (its own process, no
// simulated round trip), each call a FindMissingBlobs of one digest.

// A Floor is the client's CPU per call: one call at a time, back to back,
// and 32 in flight, as when hundreds of actions start together; and per
// bare cold action (action.go), which shows what calls cost when
// they come one by one with the process idle in between.
type Floor struct {
	Alone    time.Duration `json:"alone"`
	InFlight time.Duration `json:"in_flight"`
	Calls    int           `json:"calls"`
	// AfterIdle is a call's CPU when the process has been idle for
	// floorIdle before it, less what the process spends idle that long
	// (Idle) without calling.
	AfterIdle time.Duration `json:"after_idle"`
	Idle      time.Duration `json:"idle"`
	// Actions is a bare cold action's CPU at each of floorSpacings
	// (floor_action.go).
	Actions []actionFloor `json:"actions"`
}

const (
	floorCalls    = 4000
	floorInFlight = 32
	// floorIdleCalls calls are made after floorIdle of idleness each: a
	// small link's actions end about that far apart (lua's 33 over half a
	// second).
	floorIdleCalls = 100
	floorIdle      = 15 * time.Millisecond
)

// Measure starts the test double and the client, and returns what
// the client measured.
func Measure(ctx context.Context, dir string) (*Floor, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := server.Start(ctx, dir, "")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-rpc-floor-client", srv.Addr)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the floor's client: %w", err)
	}
	var f Floor
	if err := json.Unmarshal(out, &f); err != nil {
		return nil, fmt.Errorf("the floor's client said %q: %w", out, err)
	}
	return &f, nil
}

// Client is the client process's main: it prints an Floor in
// JSON.
func Client(addr string) error {
	f, err := measureCalls(addr, floorCalls)
	if err != nil {
		return err
	}
	if f.AfterIdle, f.Idle, err = measureIdleCalls(addr, floorIdleCalls, floorIdle); err != nil {
		return err
	}
	if f.Actions, err = measureActionFloors(addr, floorActions, floorActionRound); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(f)
}

// measureIdleCalls makes n calls, each after the process has slept idle
// for gap, and returns the CPU per call beyond that of n such sleeps
// without a call, and the CPU per sleep.
func measureIdleCalls(addr string, n int, gap time.Duration) (perCall, idle time.Duration, err error) {
	conn, call, err := findMissingCaller(addr)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	calls := func(n int, do bool) (time.Duration, error) {
		c0 := processCPU()
		for range n {
			time.Sleep(gap)
			if !do {
				continue
			}
			if err := call(); err != nil {
				return 0, err
			}
		}
		return (processCPU() - c0) / time.Duration(n), nil
	}
	if _, err := calls(max(1, n/10), true); err != nil { // warm
		return 0, 0, err
	}
	if idle, err = calls(n, false); err != nil {
		return 0, 0, err
	}
	withCall, err := calls(n, true)
	if err != nil {
		return 0, 0, err
	}
	return max(0, withCall-idle), idle, nil
}

// dialFloor is the floor client's connection to the test double: plain
// grpc-go, none of thindist's options.
func dialFloor(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// findMissingCaller dials addr and returns the connection and a function
// making one FindMissingBlobs of one digest on it: the floor's bare call.
func findMissingCaller(addr string) (*grpc.ClientConn, func() error, error) {
	conn, err := dialFloor(addr)
	if err != nil {
		return nil, nil, err
	}
	cas := repb.NewContentAddressableStorageClient(conn)
	req := &repb.FindMissingBlobsRequest{
		BlobDigests:    []*repb.Digest{{Hash: strings.Repeat("0", 64), SizeBytes: 1}},
		DigestFunction: repb.DigestFunction_SHA256,
	}
	return conn, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cas.FindMissingBlobs(ctx, req)
		return err
	}, nil
}

// measureActionFloors measures n bare cold actions at each of
// floorSpacings, on a connection of their own.
func measureActionFloors(addr string, n, rounds int) ([]actionFloor, error) {
	conn, err := dialFloor(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	dir, err := os.MkdirTemp("", "thindist-floor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var fs []actionFloor
	for _, apart := range floorSpacings {
		f, err := measureActions(conn, dir, n, rounds, apart)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// measureCalls makes n/10 calls to warm up, then n one at a time, then n
// in floorInFlight goroutines, and returns the process's CPU per call of
// each kind.
func measureCalls(addr string, n int) (*Floor, error) {
	conn, call, err := findMissingCaller(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// calls makes n calls from each of par goroutines and returns the
	// process's CPU per call.
	calls := func(n, par int) (time.Duration, error) {
		c0 := processCPU()
		var wg sync.WaitGroup
		errs := make(chan error, par)
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if err := call(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		return (processCPU() - c0) / time.Duration(n*par), nil
	}
	// Warm: the connection, protobuf's types and gRPC's paths, as in a
	// link after its first calls.
	if _, err := calls(n/10/floorInFlight, floorInFlight); err != nil {
		return nil, err
	}
	f := &Floor{Calls: n}
	if f.Alone, err = calls(n, 1); err != nil {
		return nil, err
	}
	if f.InFlight, err = calls(n/floorInFlight, floorInFlight); err != nil {
		return nil, err
	}
	return f, nil
}

// processCPU is this process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Text is the floor in a sentence, for the report.
func (f *Floor) Text() string {
	s := fmt.Sprintf("a bare gRPC call (FindMissingBlobs, answered at once) costs a client %.3f ms of CPU one at a time, %.3f ms with %d in flight",
		ms(f.Alone), ms(f.InFlight), floorInFlight)
	if f.AfterIdle > 0 {
		s += fmt.Sprintf(", and %.3f ms when the process has been idle for %v before it (beyond the %.3f ms it spends idle that long)",
			ms(f.AfterIdle), floorIdle, ms(f.Idle))
	}
	if len(f.Actions) == 0 {
		return s
	}
	var parts []string
	for _, a := range f.Actions {
		when := "ending together"
		if a.Apart > 0 {
			when = fmt.Sprintf("ending %v apart", a.Apart)
		}
		parts = append(parts, fmt.Sprintf("%.3f ms %s", ms(a.PerAction), when))
	}
	return s + fmt.Sprintf("; a bare cold action (%d at once, each making only the six calls an action no cache holds needs, a %d KB input, a %d KB output checked and written to a file) costs it %s",
		f.Actions[0].Actions, floorActionIn>>10, floorActionOut>>10, strings.Join(parts, ", "))
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
