package executor

import (
	"context"

	"github.com/thindist/thindist/internal/sys/describe"
)

// Preparer can begin a job's work before the job reaches it: the remote
// executor builds an action's remote action and uploads its input files
// (remote.Executor.Ahead). drop, called once the job has been served
// whichever way, ends what no Execute took. The one caller is a cache,
// before its lookup, when its next executor is a Preparer (PrepareAhead);
// an Execute of the job that follows takes what was prepared.
type Preparer interface {
	Ahead(ctx context.Context, j Job) (drop func())
}

// PrepareAhead returns next as a Preparer whose work ahead is p's: placed
// directly below a cache (cache.NewExecutor), it lets the cache begin each
// job's remote upload while it looks the job up, although the executor
// that uploads (p) sits further down the chain, beyond the decorators
// that choose whether the job runs there at all. The chain shows the jump
// ("Ahead[RemoteExecution]"); Execute is next's.
func PrepareAhead(next Executor, p Preparer) Executor { return &ahead{next: next, p: p} }

type ahead struct {
	next Executor
	p    Preparer
}

func (a *ahead) Execute(ctx context.Context, j Job) (*Result, error) { return a.next.Execute(ctx, j) }

// Ahead implements Preparer.
func (a *ahead) Ahead(ctx context.Context, j Job) func() { return a.p.Ahead(ctx, j) }

// Describe names the decorator, with the Preparer whose work it begins
// ahead as its note, and the executor it wraps (describe.Describer).
func (a *ahead) Describe() describe.Node {
	n := node("Ahead", a.next)
	n.Notes = []string{describe.Of(a.p).Label()}
	return n
}

func (a *ahead) String() string { return describe.Line(a) }
