package pipeline

import (
	"errors"
	"fmt"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/sys/jobserver"
	"github.com/thindist/thindist/internal/sys/rundir"
)

// QuietJobserver keeps the warning that make's jobserver is not available
// to this recipe for the first run of a make invocation that meets it
// (every link of a CMake build, and every plugin link under such a recipe,
// would print it, and the user can act on it once at most), saying how to
// silence it; with --no-jobserver-warning, for none. Call it before Run.
func (s *Session) QuietJobserver(cfg *config.Config) {
	js := &s.Env.Jobserver
	var na *jobserver.NotAvailableError
	if !errors.As(js.Err, &na) {
		return
	}
	if cfg.NoJobserverWarning || !rundir.FirstInBuild(rundir.Path(s.Env.Getenv), "jobserver-warning") {
		js.Err = nil
		return
	}
	js.Err = fmt.Errorf("%w (said once per make; --no-jobserver-warning or THINDIST_NO_JOBSERVER_WARNING=1 silences it)", na)
}
