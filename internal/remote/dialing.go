package remote

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// DialTimeout bounds connecting to the remote service; a service that
// cannot be reached in that time is given up for the run.
const DialTimeout = 30 * time.Second

// Dialing is a connection to the remote service being made while the
// caller does other work, such as reading its job file. A dial takes
// round trips (TCP, TLS, HTTP/2's settings, GetCapabilities) and depends
// on nothing but the options: made after the job file is read, it only
// adds them to the link. A run given one takes its client (Connect)
// instead of dialing, if it still asks for the same options.
type Dialing struct {
	opts Options
	done chan struct{} // closed once client and err are set

	client *Client
	err    error

	mu    sync.Mutex
	taken bool // by a run (claim) or for closing (Close)
}

// StartDial begins connecting to the service opts names, within
// DialTimeout.
func StartDial(ctx context.Context, opts Options) *Dialing {
	d := &Dialing{opts: opts, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.client, d.err = dialWithin(ctx, d.opts)
	}()
	return d
}

// dialWithin connects to the remote service within DialTimeout.
func dialWithin(ctx context.Context, opts Options) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	return Dial(ctx, opts)
}

// Connect returns the client of d's dial, once it is made, if d was begun
// with opts and nobody has taken it; otherwise, and for a nil d, it dials
// itself, within DialTimeout. A caller whose ctx ends first leaves d's
// client to be closed once made.
func (d *Dialing) Connect(ctx context.Context, opts Options) (*Client, error) {
	if !d.claim(opts) {
		return dialWithin(ctx, opts)
	}
	return d.wait(ctx)
}

// claim hands the dial over to the caller if it was made with opts and
// nobody has claimed it; the caller then waits for it (wait).
func (d *Dialing) claim(opts Options) bool {
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
func (d *Dialing) wait(ctx context.Context) (*Client, error) {
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
