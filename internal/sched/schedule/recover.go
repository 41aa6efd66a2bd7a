package schedule

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/thindist/thindist/internal/executor"
)

// runSafe is runOne, with a panic in the executor chain turned into that
// action's failure: the run stops and cleans up as for any failure instead
// of killing the process (which, for the plugin, is the linker).
func runSafe(ctx context.Context, j executor.Job, ex executor.Executor, st *staging) (res *executor.Result, done []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("%s: internal error (panic): %v\n%s", j.Action.ID, p, debug.Stack())
		}
	}()
	return runOne(ctx, j, ex, st)
}
