package remote

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thindist/thindist/internal/remote/reapi"
)

// ToolchainStats are what a run did to make the shipped toolchains
// present in the CAS (ExecOptions.Toolchain).
type ToolchainStats struct {
	// Used is set once an action went out with a shipped toolchain.
	Used bool
	// Files and Bytes are the distinct files of the toolchains shipped
	// and their size, present or not.
	Files int
	Bytes int64
	// Uploaded is what was sent for them (the files the CAS lacked), and
	// Took how long making them present took: the first action's wait.
	Uploaded int64
	Took     time.Duration
}

// toolchains makes each shipped toolchain present in the CAS once a run,
// and counts what that cost.
type toolchains struct {
	mu       sync.Mutex
	seen     map[*reapi.Shipped]bool
	stats    ToolchainStats
	uploaded atomic.Int64
}

// sentMeter counts, for the run's toolchain figures, what is sent through
// it, and passes it on to the action's meter.
type sentMeter struct {
	next Meter
	n    *atomic.Int64
}

func (m sentMeter) Sent(n int64) {
	m.n.Add(n)
	if m.next != nil {
		m.next.Sent(n)
	}
}

func (m sentMeter) Received(n int64) {
	if m.next != nil {
		m.next.Received(n)
	}
}

// shipToolchain makes the toolchain ex ships (if any) present in the CAS
// before its action's own inputs: its Directory messages and files are
// asked about (FindMissingBlobs) and sent if missing, by the first action
// of the run that ships it; the others wait for that (the Uploader's
// claims) and then cost nothing.
func (e *Executor) shipToolchain(ctx context.Context, m Meter, ex *reapi.Executable) error {
	tc := ex.Toolchain
	if tc == nil {
		return nil
	}
	t := &e.tc
	t.mu.Lock()
	first := !t.seen[tc]
	if first {
		if t.seen == nil {
			t.seen = map[*reapi.Shipped]bool{}
		}
		t.seen[tc] = true
		t.stats.Used = true
		for d := range tc.Files {
			t.stats.Files++
			t.stats.Bytes += d.Size
		}
	}
	t.mu.Unlock()
	if first {
		e.c.PackUploads(tc.Files)
	}
	start := time.Now()
	err := e.c.CAS.Ensure(ctx, sentMeter{m, &t.uploaded}, tc.Blobs, tc.Files)
	if first && err == nil {
		t.mu.Lock()
		t.stats.Took += time.Since(start)
		t.mu.Unlock()
	}
	return err
}

// shipAgain makes the toolchain ex ships present anew, after the server
// said some of ex's inputs went missing (evicted): what it asks about and
// sends is counted as the toolchain's.
func (e *Executor) shipAgain(ctx context.Context, m Meter, ex *reapi.Executable) error {
	tc := ex.Toolchain
	if tc == nil {
		return nil
	}
	for d := range tc.Blobs {
		e.c.CAS.Forget(d)
	}
	for d := range tc.Files {
		e.c.CAS.Forget(d)
	}
	if err := e.c.CAS.Ensure(ctx, sentMeter{m, &e.tc.uploaded}, tc.Blobs, tc.Files); err != nil {
		return fmt.Errorf("uploading the compiler's toolchain again: %w", err)
	}
	return nil
}

// ToolchainStats returns what making the shipped toolchains present has
// cost so far.
func (e *Executor) ToolchainStats() ToolchainStats {
	e.tc.mu.Lock()
	defer e.tc.mu.Unlock()
	st := e.tc.stats
	st.Uploaded = e.tc.uploaded.Load()
	return st
}

// RunShipped runs the shipped toolchain tc's compiler with args on a
// worker, from an input root holding tc alone, uncached (for `thindist
// doctor`): it makes tc present in the CAS first, as a link would.
func (e *Executor) RunShipped(ctx context.Context, tc *reapi.Shipped, args []string) (*CommandResult, error) {
	e.c.PackUploads(tc.Files)
	if err := e.c.CAS.Ensure(ctx, nil, tc.Blobs, tc.Files); err != nil {
		return nil, fmt.Errorf("uploading the compiler's toolchain: %w", err)
	}
	tree := reapi.NewTree()
	if err := tc.AddTo(tree); err != nil {
		return nil, err
	}
	return e.runIn(ctx, tree, append(tc.Argv("."), args...))
}
