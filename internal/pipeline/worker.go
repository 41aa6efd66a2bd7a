package pipeline

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/proc"
	"github.com/thindist/thindist/internal/report"
	"github.com/thindist/thindist/internal/worker"
)

// Workers puts a worker.Runner in front of runner when cfg allows and a
// thindist-worker is there: the one --worker names (a warning when it is
// not), else the one beside thindist's executable (none is fine: workers
// are optional). The jobs a worker does not take go to runner, the jobs a
// worker failed are rerun by exec. The returned func ends the workers and
// notes on tl how many backends they compiled.
func Workers(cfg *config.Config, runner proc.Runner, tl *report.Timeline, warn func(string, ...any)) (proc.Runner, func()) {
	if cfg.NoWorker {
		return runner, func() {}
	}
	path := cfg.Worker
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return runner, func() {}
		}
		path = filepath.Join(filepath.Dir(exe), "thindist-worker")
		if _, err := os.Stat(path); err != nil {
			return runner, func() {}
		}
	} else if _, err := os.Stat(path); err != nil {
		warn("--worker: %v; compiling without a worker (build it with scripts/install.sh, or pass --no-worker)", err)
		return runner, func() {}
	}
	w := worker.NewRunner(runner, proc.Exec{}, worker.Options{Path: path})
	return w, func() {
		w.Close()
		if st := w.Stats(); st.Jobs > 0 || st.Reruns > 0 {
			tl.Detail("backends", fmt.Sprintf("%d on %s, %d rerun by exec", st.Jobs, plural(st.Started, "worker"), st.Reruns))
		}
	}
}
