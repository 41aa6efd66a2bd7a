package workerserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/sys/lockfile"
)

// ConnectOptions say which server a link wants.
type ConnectOptions struct {
	Dir    string        // the user's server directory (the server's is InstallDir in it)
	Self   string        // the thindist executable, run as `Self server run` to start one
	Worker string        // the thindist-worker executable
	Idle   time.Duration // the idle period of a server it starts
	Wait   time.Duration // how long to wait for a server it starts; 0 means 10 s
}

// Connect returns a Client of the server of this installation
// (InstallDir) in o.Dir, started if none answers there or the one there
// is stale (see Serve). Starting one holds the server directory's lock, so
// concurrent links start one server. An error says why the link cannot
// use a server: a directory is not the user's alone
// (rundir.Private), or a server could not be started.
func Connect(o ConnectOptions) (*Client, error) {
	if o.Wait == 0 {
		o.Wait = 10 * time.Second
	}
	id, err := Own(o.Self, o.Worker)
	if err != nil {
		return nil, err
	}
	dir, err := installDir(o.Dir, id)
	if err != nil {
		return nil, err
	}
	cl := &Client{dir: dir, hello: append([]string{"hello", linkName()}, id.fields()...)}
	if cl.first() == nil {
		return cl, nil
	}
	err = lockfile.With(filepath.Join(dir, lockName), func() error {
		if cl.first() == nil {
			return nil
		}
		exited, err := spawn(o)
		if err != nil {
			return fmt.Errorf("cannot start the worker server %s: %v", o.Self, err)
		}
		for deadline := time.Now().Add(o.Wait); ; time.Sleep(5 * time.Millisecond) {
			err := cl.first()
			if err == nil {
				cl.started = true
				return nil
			}
			select {
			case e := <-exited:
				return fmt.Errorf("the worker server it started exited (%v); its log is %s", e, filepath.Join(dir, logName))
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the worker server it started did not answer within %s (%v); its log is %s", o.Wait, err, filepath.Join(dir, logName))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// first opens the client's first connection, kept idle for its first job.
func (cl *Client) first() error {
	cc, err := cl.open()
	if err != nil {
		return err
	}
	cl.put(cc)
	return nil
}

// spawn starts `o.Self server run` detached: a process group of its own
// (a terminal's ^C or a build's kill of its group does not reach it; it
// ignores SIGHUP), its standard streams on /dev/null, in /, without make's
// jobserver variables. It stays in the starting link's session, not one
// of its own: with the kernel's autogroup scheduling, a session is
// weighed as one task group, and a server in a session of its own would
// have its jobs weighed against the whole build's on a loaded machine.
// exited receives how it ended, should it end while this process runs.
func spawn(o ConnectOptions) (exited chan error, err error) {
	cmd := exec.Command(o.Self, "server", "run", "--server-dir="+o.Dir, "--worker="+o.Worker, "--worker-idle="+o.Idle.String())
	cmd.Dir = "/"
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}
