package pipeline

import (
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/sys/rundir"
)

// QuietJobserver keeps the warning that make's jobserver is not available
// to this recipe for the first run of a make invocation that meets it
// (jobserver.Inherited.OncePerBuild), saying how to silence it; with
// --no-jobserver-warning, for none. Call it before Run.
func (s *Session) QuietJobserver(cfg *config.Config) {
	s.Env.Jobserver = s.Env.Jobserver.OncePerBuild(rundir.Path(s.Env.Getenv), cfg.NoJobserverWarning,
		"--no-jobserver-warning or THINDIST_NO_JOBSERVER_WARNING=1 silences it")
}
