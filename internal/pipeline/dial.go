package pipeline

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/remote"
)

// dialTimeout bounds connecting to the remote service; a service that
// cannot be reached in that time is given up for the run.
const dialTimeout = 30 * time.Second

// Dialing is a connection to the remote service being made while the
// caller does other work, such as reading its job file. A dial takes
// round trips (TCP, TLS, HTTP/2's settings, GetCapabilities) and depends
// on nothing but the configuration: made after the job file is read, it
// only adds them to the link. A run given one (Env.Dialing) takes its
// client instead of dialing, if the configuration still asks for the same.
type Dialing struct {
	opts remote.Options
	done chan struct{} // closed once client and err are set

	client *remote.Client
	err    error

	mu    sync.Mutex
	taken bool // by a run (claim) or for closing (Close)
}

// StartDial begins connecting to the remote service cfg names; nil if it
// names none.
func StartDial(ctx context.Context, cfg *config.Config) *Dialing {
	if cfg.Remote.Target == "" {
		return nil
	}
	d := &Dialing{opts: RemoteOptions(&cfg.Remote), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.client, d.err = dial(ctx, d.opts)
	}()
	return d
}

// dial connects to the remote service within dialTimeout.
func dial(ctx context.Context, opts remote.Options) (*remote.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return remote.Dial(ctx, opts)
}

// claim hands the dial over to the caller if it was made with opts and
// nobody has claimed it; the caller then waits for it (wait), and dials
// itself otherwise.
func (d *Dialing) claim(opts remote.Options) bool {
	if d == nil || !reflect.DeepEqual(d.opts, opts) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taken {
		return false
	}
	d.taken = true
	return true
}

// wait returns the claimed dial's client once it is made. A caller that
// gives up leaves it to be closed once made.
func (d *Dialing) wait(ctx context.Context) (*remote.Client, error) {
	select {
	case <-d.done:
		return d.client, d.err
	case <-ctx.Done():
		d.closeWhenDone()
		return nil, ctx.Err()
	}
}

// Close releases the connection if no run took it (the job file could
// not be read, the run never connected). It does not wait for the dial.
func (d *Dialing) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.taken {
		d.taken = true
		d.closeWhenDone()
	}
}

func (d *Dialing) closeWhenDone() {
	go func() {
		<-d.done
		if d.client != nil {
			d.client.Close()
		}
	}()
}
