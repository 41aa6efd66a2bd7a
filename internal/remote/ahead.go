package remote

import (
	"context"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
)

// A preparation is an action's remote execution begun by Ahead: its remote
// action, built, and the upload of its inputs, under way or done.
type preparation struct {
	ex     *reapi.Executable
	cancel context.CancelFunc
}

// Ahead implements executor.Preparer: it begins a's remote execution up
// to its upload, and returns at once: it builds the remote action and
// makes its input files (the modules) present in the CAS in the
// background. An Execute of a that follows takes
// the built action and waits only for what is left of the upload. drop, to
// be called once a has been served whichever way, cancels an upload that
// no Execute took.
//
// A cache above calls it before its lookup when it expects a miss,
// through the executor.PrepareAhead directly below it: a cold action's
// modules then go up while it is looked up, and after the miss only its
// own new messages and shard remain, sent unasked (EnsureNew): a round trip and the modules' upload
// fewer between the lookup and the Execute. A lookup that hits has cost a
// FindMissingBlobs, and the upload of modules the service lacked, which a
// miss would have sent too.
func (e *Executor) Ahead(ctx context.Context, j executor.Job) (drop func()) {
	a := j.Action
	if e.off.Load() != nil {
		return func() {}
	}
	ex, err := reapi.BuildExecutable(a, e.execOptions(j.Shard, false))
	if err != nil {
		return func() {} // Execute builds it again and says why
	}
	uctx, cancel := context.WithCancel(forAction(ctx, a.ID, ex.ActionDigest))
	e.prepared.Store(a, &preparation{ex: ex, cancel: cancel})
	e.ahead.Add(1)
	// The files only: the action's own messages and shard are new if the
	// lookup misses, and go with Execute (EnsureNew); if it hits, nothing
	// was sent that the service did not lack already. Execute's own
	// Ensure waits for this one's claims, and sends again what this one
	// failed to.
	go e.c.CAS.Ensure(uctx, j.Meter, nil, ex.Files)
	return func() {
		if _, ok := e.prepared.LoadAndDelete(a); ok {
			e.aheadUnused.Add(1)
			cancel()
		}
	}
}

// take returns what Ahead prepared for a, or nil; only one Execute gets it.
func (e *Executor) take(a *action.Action) *preparation {
	if v, ok := e.prepared.LoadAndDelete(a); ok {
		return v.(*preparation)
	}
	return nil
}

// release cancels p's upload if it is still under way (nothing for a nil
// p): Execute is done with it.
func (p *preparation) release() {
	if p != nil {
		p.cancel()
	}
}

// execOptions are the options an action's remote action is built with,
// from its shard's bytes if a cache read them (executor.Job.Shard; nil:
// read the file); second makes it a second execution (do_not_cache).
func (e *Executor) execOptions(shard []byte, second bool) reapi.ExecOptions {
	return reapi.ExecOptions{
		Files: e.o.Files, Compiler: e.o.Compiler, Platform: e.platform, Env: e.env, Timeout: e.o.Timeout, DoNotCache: second,
		Shard: shard, Toolchain: e.o.Toolchain,
	}
}
