package executor

import (
	"context"
	"sync"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
)

// LocalFor runs on this machine the actions that only a compile here
// serves, and every other action through next. why names what keeps an
// action here ("" for none): a command that asks the compiler for files
// beside its declared outputs (--save-temps, an optimization record), which
// a remote worker would write on its own disk. The first such action is
// told to note once, with its reason.
type LocalFor struct {
	next, local Executor
	why         func(*action.Action) string
	note        func(format string, args ...any)
	once        sync.Once
}

// NewLocalFor returns the LocalFor that sends the actions why names to
// local, the others to next; note, if not nil, hears of the first.
func NewLocalFor(next, local Executor, why func(*action.Action) string, note func(format string, args ...any)) *LocalFor {
	return &LocalFor{next: next, local: local, why: why, note: note}
}

// Execute implements Executor.
func (l *LocalFor) Execute(ctx context.Context, j Job) (*Result, error) {
	reason := l.why(j.Action)
	if reason == "" {
		return l.next.Execute(ctx, j)
	}
	if l.note != nil {
		l.once.Do(func() {
			l.note("%s asks the compiler for side files (%s): such backends compile on this machine, "+
				"where the files are written", j.Action.ID, reason)
		})
	}
	return l.local.Execute(ctx, j)
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (l *LocalFor) Describe() describe.Node { return node("LocalFor", l.next, l.local) }

func (l *LocalFor) String() string { return describe.Line(l) }
