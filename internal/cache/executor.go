package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/describe"
	"github.com/thindist/thindist/internal/sys/digest"
)

// Options configures NewExecutor.
type Options struct {
	// Where labels hits (executor.LocalCache or executor.RemoteCache).
	Where executor.Where
	// ReadOnly looks results up but never stores them.
	ReadOnly bool
	// StoreFrom, if set, says whose results may be stored, by the
	// Result.Where of next's result: a shared remote cache takes what
	// remote workers produced, and what this machine compiled only when
	// the user lets it (--remote-upload, on by default). Nil stores every result.
	StoreFrom func(executor.Where) bool
	// StoreMessages writes each stored result's canonical Action and
	// Command (reapi.Keyer.Messages, with KeepMessages set) to the store
	// before its entry, as REAPI asks of a client that writes an
	// ActionCache: a server may check them, to control access by the kind
	// of action or to show what produced the result.
	StoreMessages bool
	// Warn reports a cache problem that did not stop the action.
	Warn func(format string, args ...any)
	// Run is the ID of the run (its record's), stored with each result
	// so that a later hit can say which run's compile printed what it
	// replays (executor.Provenance.Replayed).
	Run string
	// Unusable, if set, hears of each action whose entry was found but
	// could not be used (err says why), before the action runs.
	Unusable func(a *action.Action, err error)
	// Claims, if set, are the claims of the processes that share the
	// store (a disk cache's): an action missed is claimed while next runs
	// it, and a miss of an action another process has claimed waits for
	// that one's result and serves it from the store (a hit), or runs it
	// if none came (that compile failed, its process died). Not with
	// ReadOnly, which stores nothing to wait for.
	Claims *Claims
}

// ExecutorStats are what one run of a cache executor saw.
type ExecutorStats struct {
	Hits, Misses int64
	// SavedCPU is the compile CPU time of the results served.
	SavedCPU time.Duration
}

// Executor is an executor.Executor that serves results from a Store and
// stores the results of next. next must only return verified results
// (executor.Verified): a failure is never stored, because it comes back
// from next as an error.
type Executor struct {
	store Store
	keys  *reapi.Keyer
	next  executor.Executor
	// prep is next as an executor.Preparer, nil if it is none.
	prep executor.Preparer
	opts Options

	hits, misses, savedCPU atomic.Int64
}

// Stats returns what e has seen so far.
func (e *Executor) Stats() ExecutorStats {
	return ExecutorStats{Hits: e.hits.Load(), Misses: e.misses.Load(), SavedCPU: time.Duration(e.savedCPU.Load())}
}

// NewExecutor returns the decorator. If next is an executor.Preparer
// (executor.PrepareAhead), its work is begun before each lookup while the
// lookups of the run mostly miss (no more hits than misses so far), so
// that it goes on while the store answers: a remote executor uploads the
// action's input files meanwhile (remote.Executor.Ahead). What it began
// is dropped once the action has been served, whichever way.
func NewExecutor(store Store, keys *reapi.Keyer, next executor.Executor, opts Options) *Executor {
	if opts.Warn == nil {
		opts.Warn = func(string, ...any) {}
	}
	prep, _ := next.(executor.Preparer)
	return &Executor{store: store, keys: keys, next: next, prep: prep, opts: opts}
}

// Execute serves a from the store if it can, else runs it and stores the
// result.
func (e *Executor) Execute(ctx context.Context, j executor.Job) (*executor.Result, error) {
	a, out := j.Action, j.Out
	key, shard, err := e.keys.KeyShard(a)
	if err != nil {
		var nc *reapi.NotCached
		if !errors.As(err, &nc) { // by design, and in the record: no warning
			e.opts.Warn("%s: not cached: %v", a.ID, err)
		}
		return e.next.Execute(ctx, j)
	}
	// The shard just read for the key goes down with the job: a remote
	// executor below builds its remote action from the same bytes.
	j.Shard = shard
	var msgs map[digest.Digest][]byte
	if e.opts.StoreMessages {
		msgs, _ = e.keys.Messages(a) // taken now, so that a hit does not leave them kept
	}
	if e.prep != nil && e.hits.Load() <= e.misses.Load() {
		drop := e.prep.Ahead(ctx, j)
		defer drop()
	}
	res, err := e.lookup(ctx, j.Meter, key, a, out)
	if err == nil {
		e.hits.Add(1)
		e.savedCPU.Add(int64(res.CPU))
		return res, nil
	}
	unavailable := errors.Is(err, ErrUnavailable)
	if !errors.Is(err, ErrNotFound) && !unavailable {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.opts.Warn("%s: cache entry unusable, recompiling: %v", a.ID, err)
		if e.opts.Unusable != nil {
			e.opts.Unusable(a, err)
		}
	}
	if e.opts.Claims != nil && !e.opts.ReadOnly && !unavailable {
		release, waited, err := e.opts.Claims.Claim(ctx, key)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			e.opts.Warn("%s: %v; compiling it here as well", a.ID, err)
		default:
			defer release()
			if waited {
				if res, err := e.lookup(ctx, j.Meter, key, a, out); err == nil {
					e.hits.Add(1)
					e.savedCPU.Add(int64(res.CPU))
					return res, nil
				}
			}
		}
	}
	e.misses.Add(1)
	res, err = e.next.Execute(ctx, j)
	if err != nil || res.Failed() || unavailable || e.opts.ReadOnly || e.opts.StoreFrom != nil && !e.opts.StoreFrom(res.Where) {
		return res, err
	}
	if err := e.store1(ctx, j.Meter, key, msgs, res, out); err != nil && ctx.Err() == nil && !errors.Is(err, ErrUnavailable) {
		e.opts.Warn("%s: could not store the result in the cache: %v", a.ID, err)
	}
	return res, nil
}

// Describe names the decorator by its store (LocalCache or RemoteCache)
// and wraps the executor it serves misses with (describe.Describer).
func (e *Executor) Describe() describe.Node {
	name := "LocalCache"
	if e.opts.Where == executor.RemoteCache {
		name = "RemoteCache"
	}
	return describe.Node{Name: name, Wraps: []any{e.next}}
}

func (e *Executor) String() string { return describe.Line(e) }

// lookup fetches the result for key into out. Any problem with the entry
// (a missing or corrupt blob, a record that does not match the action) is
// returned as an error and the action runs.
func (e *Executor) lookup(ctx context.Context, m Meter, key digest.Digest, a *action.Action, out []string) (_ *executor.Result, err error) {
	start := time.Now()
	inline := make([]string, len(a.Outputs))
	for i := range inline {
		inline[i] = outputName(i)
	}
	ar, err := e.store.GetActionResult(ctx, m, key, inline)
	if err != nil {
		return nil, err
	}
	if ar.ExitCode != 0 {
		return nil, fmt.Errorf("the entry records exit code %d", ar.ExitCode)
	}
	files := map[string]*repb.OutputFile{}
	for _, f := range ar.OutputFiles {
		files[f.Path] = f
	}
	defer func() {
		if err != nil {
			// The outputs placed before the entry turned out unusable (a
			// blob missing or corrupt) may be hard links into the store:
			// take them away before anything else writes these paths. (A
			// miss places nothing, and costs no removals.)
			for _, o := range out {
				os.Remove(o)
			}
		}
	}()
	ds := make([]digest.Digest, len(a.Outputs))
	// The object's first bytes, when placing it read them (head[:n]).
	var head [64]byte
	n := -1
	for i := range a.Outputs {
		f, ok := files[outputName(i)]
		if !ok {
			return nil, fmt.Errorf("the entry lacks output %d", i)
		}
		d, err := digest.FromProto(f.Digest)
		if err != nil {
			return nil, err
		}
		var h []byte
		if i == 0 {
			h = head[:]
		}
		got, err := e.readOutput(ctx, m, f, d, out[i], h)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			n = got
		}
		ds[i] = d
	}
	if n >= 0 {
		err = executor.CheckObjectBytes(head[:n])
	} else {
		err = executor.CheckObject(out[0])
	}
	if err != nil {
		return nil, fmt.Errorf("cached object: %v", err)
	}
	// Each output was verified against its digest as it was placed.
	res := &executor.Result{Provenance: executor.Provenance{Where: e.opts.Where, Replayed: producer(ar)}, CPU: cpuOf(ar),
		ObjectChecked: true, OutputDigests: ds}
	if d, err := digest.FromProto(ar.StderrDigest); err == nil && d.Size > 0 {
		// Inlined (stderr_raw) when the store could; read otherwise.
		if res.Stderr = ar.StderrRaw; int64(len(res.Stderr)) != d.Size || digest.OfBytes(res.Stderr) != d {
			if res.Stderr, err = e.store.ReadBlobBytes(ctx, m, d); err != nil {
				return nil, err
			}
		}
	}
	res.Wall = time.Since(start)
	return res, nil
}

// readOutput writes output f, whose digest is d, to dst: from the contents
// the store returned inline when they are whole and match d, else from the
// store's blobs. Given a head, it copies dst's first len(head) bytes into
// it and returns how many when it has them without another read (the
// inline contents, or a HeadReader store), and -1 when it has not.
func (e *Executor) readOutput(ctx context.Context, m Meter, f *repb.OutputFile, d digest.Digest, dst string, head []byte) (int, error) {
	if f.Contents == nil || int64(len(f.Contents)) != d.Size {
		if hr, ok := e.store.(HeadReader); ok && head != nil {
			return hr.ReadBlobHead(ctx, m, d, dst, head)
		}
		return -1, e.store.ReadBlob(ctx, m, d, dst)
	}
	if digest.OfBytes(f.Contents) != d {
		return -1, fmt.Errorf("the inline contents of %s do not match its digest %s", f.Path, d)
	}
	// dst is the caller's private output path (executor.Executor), written
	// once; it may be a hard link into a cache left by an earlier attempt:
	// WritePrivate replaces it rather than write through it.
	if err := atomicfile.WritePrivate(dst, f.Contents, 0o644); err != nil {
		return -1, err
	}
	return copy(head, f.Contents), nil
}

func (e *Executor) store1(ctx context.Context, m Meter, key digest.Digest, msgs map[digest.Digest][]byte, res *executor.Result, out []string) error {
	if e.opts.StoreMessages && msgs == nil {
		return fmt.Errorf("its Action and Command, which the store must have first, were not kept")
	}
	for d, b := range msgs {
		if err := e.store.WriteBlobBytes(ctx, m, d, b); err != nil {
			return err
		}
	}
	ar := &repb.ActionResult{ExitCode: 0}
	known := res.OutputDigests
	if len(known) != len(out) {
		known = nil
	}
	for i, p := range out {
		var d digest.Digest
		var err error
		if known != nil {
			d = known[i] // the executor verified it: no second read
		} else if d, err = digest.OfFile(p); err != nil {
			return err
		}
		if err := e.store.WriteBlob(ctx, m, d, p); err != nil {
			return err
		}
		ar.OutputFiles = append(ar.OutputFiles, &repb.OutputFile{Path: outputName(i), Digest: d.Proto()})
	}
	if len(res.Stderr) > 0 {
		d := digest.OfBytes(res.Stderr)
		if err := e.store.WriteBlobBytes(ctx, m, d, res.Stderr); err != nil {
			return err
		}
		ar.StderrDigest = d.Proto()
	}
	cpu, err := anypb.New(durationpb.New(res.CPU))
	if err != nil {
		return err
	}
	worker := "thindist"
	if e.opts.Run != "" {
		worker += " run " + e.opts.Run
	}
	ar.ExecutionMetadata = &repb.ExecutedActionMetadata{Worker: worker, AuxiliaryMetadata: []*anypb.Any{cpu},
		ExecutionCompletedTimestamp: timestamppb.Now()}
	return e.store.UpdateActionResult(ctx, key, ar)
}

// outputName is output i's path in a result: the canonical action's name.
func outputName(i int) string { return fmt.Sprintf("out/%d", i) }

// producer names the compile that produced ar: a thindist run by its ID,
// else the worker that ran it and when, as far as ar says.
func producer(ar *repb.ActionResult) string {
	md := ar.GetExecutionMetadata()
	if id, ok := strings.CutPrefix(md.GetWorker(), "thindist run "); ok {
		return "run " + id
	}
	what := "an earlier compile"
	if w := md.GetWorker(); w != "" && w != "thindist" {
		what = "a compile on " + w
	}
	if t := md.GetExecutionCompletedTimestamp(); t != nil {
		what += " of " + t.AsTime().Local().Format("2006-01-02 15:04:05")
	}
	return what
}

// cpuOf is the compile's CPU time as recorded with the result, for "saved
// CPU time": thindist's own record if present, else the execution's wall
// time as a remote worker reports it.
func cpuOf(ar *repb.ActionResult) time.Duration {
	md := ar.GetExecutionMetadata()
	for _, aux := range md.GetAuxiliaryMetadata() {
		var d durationpb.Duration
		if aux.UnmarshalTo(&d) == nil {
			return d.AsDuration()
		}
	}
	if s, c := md.GetExecutionStartTimestamp(), md.GetExecutionCompletedTimestamp(); s != nil && c != nil {
		return c.AsTime().Sub(s.AsTime())
	}
	return 0
}
