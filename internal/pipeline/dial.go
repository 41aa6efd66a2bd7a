package pipeline

import (
	"context"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/remote"
)

// StartDial begins connecting to the remote service cfg names
// (remote.StartDial, for Env.Dialing); nil if it names none.
func StartDial(ctx context.Context, cfg *config.Config) *remote.Dialing {
	if cfg.Remote.Target == "" {
		return nil
	}
	return remote.StartDial(ctx, RemoteOptions(&cfg.Remote))
}
