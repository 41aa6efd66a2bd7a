package workerserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/thindist/thindist/internal/local/worker"
	"github.com/thindist/thindist/internal/sys/procstart"
)

// Status is what `thindist server status` shows of a running server.
type Status struct {
	Dir      string           `json:"dir"` // the server's directory (InstallDir)
	Socket   string           `json:"socket"`
	Log      string           `json:"log"`
	PID      int              `json:"pid"`
	Started  time.Time        `json:"started"`
	Uptime   string           `json:"uptime"`
	Idle     string           `json:"idle_period"`
	Identity Identity         `json:"identity"`
	Workers  worker.PoolStats `json:"workers"`
	// Links counts the links served; Connections those open now (the
	// status request's own aside).
	Links       int `json:"links"`
	Connections int `json:"connections"`
	Refused     int `json:"refused,omitempty"` // connections of other users
	// Compilers are the compilers checked, with the check's verdict.
	Compilers []worker.Verdict `json:"compilers"`
	// ForkServers are the fork servers running for the jobs no worker
	// takes, and Forked the jobs they ran.
	ForkServers int `json:"fork_servers"`
	Forked      int `json:"forked"`
	// Exiting, when set, says why the server takes no more links.
	Exiting string `json:"exiting,omitempty"`
}

func (s *server) status() []byte {
	s.mu.Lock()
	st := Status{Dir: s.o.Dir, Socket: s.ln.Addr().String(), Log: filepath.Join(s.o.Dir, logName), PID: os.Getpid(),
		Started: s.begin, Uptime: time.Since(s.begin).Round(time.Second).String(), Idle: s.o.Idle.String(),
		Identity: s.id, Links: s.served, Connections: s.conns - 1, Refused: s.refused, Exiting: s.stale}
	s.mu.Unlock()
	st.Workers, st.Compilers = s.pool.Stats(), s.pool.Compilers()
	st.ForkServers, st.Forked = s.forks.stats()
	b, _ := json.Marshal(st)
	return b
}

// ErrNoServer: no server answers in the directory.
var ErrNoServer = errors.New("no server running")

// Socket is the server's socket in dir.
func Socket(dir string) string { return filepath.Join(dir, sockName) }

// QueryStatus asks the server in dir how it is; ErrNoServer when none
// answers.
func QueryStatus(dir string) (*Status, error) {
	f, err := request(dir, "status")
	if err != nil {
		return nil, err
	}
	if len(f) != 2 || f[0] != "status" {
		return nil, fmt.Errorf("the server at %s answered %q", Socket(dir), f)
	}
	var st Status
	if err := json.Unmarshal([]byte(f[1]), &st); err != nil {
		return nil, fmt.Errorf("the server at %s answered: %v", Socket(dir), err)
	}
	return &st, nil
}

// Stop ends the server in dir and its workers, and waits (up to wait)
// until it is gone; it returns its process ID, or ErrNoServer.
func Stop(dir string, wait time.Duration) (int, error) {
	f, err := request(dir, "stop")
	if err != nil {
		return 0, err
	}
	pid := 0
	if len(f) == 2 && f[0] == "stopping" {
		pid, _ = strconv.Atoi(f[1])
	} else {
		return 0, fmt.Errorf("the server at %s answered %q", Socket(dir), f)
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		if Gone(pid) {
			return pid, nil
		}
		if time.Now().After(deadline) {
			return pid, fmt.Errorf("the server (pid %d) still runs %s after it was asked to stop", pid, wait)
		}
	}
}

// request sends the server in dir a request of one field and returns its
// answer.
func request(dir, what string) ([]string, error) {
	c, err := dial(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := worker.WriteMessage(c, []string{what}); err != nil {
		return nil, err
	}
	f, err := worker.ReadMessage(bufio.NewReader(c), 16)
	if err != nil {
		return nil, fmt.Errorf("the server at %s: %v", Socket(dir), err)
	}
	if len(f) == 2 && f[0] == "refused" {
		return nil, fmt.Errorf("the server at %s refused: %s", Socket(dir), f[1])
	}
	return f, nil
}

// dial connects to the server in dir, which must be this user's; no
// server there is ErrNoServer.
func dial(dir string) (*net.UnixConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: Socket(dir), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoServer, err)
	}
	if uid, err := peerUID(c); err != nil || uid != os.Getuid() {
		c.Close()
		return nil, fmt.Errorf("the server at %s is user %d's, not yours (%v)", Socket(dir), uid, err)
	}
	return c, nil
}

// Gone reports whether process pid has exited (a zombie, not yet waited
// for by its parent, has).
func Gone(pid int) bool {
	st, err := procstart.ReadStat(pid)
	return err != nil || st.State() == "Z"
}
