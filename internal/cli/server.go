package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/workerserver"
)

const serverIntro = `Usage:
  thindist server status [--json]   the per-user worker server: its socket, pid,
                                    uptime, idle period, thindist and worker,
                                    workers idle and busy, jobs and links served,
                                    and each compiler checked with the verdict
  thindist server stop              end the server and its workers (links running
                                    rerun their jobs by exec)

A link keeps its backend workers warm in a server of the user's (one per user):
started on demand by the first link that has a worker, reused by the next, gone
after --worker-idle without a link (default 5m; 0, or the environment variable
CI set, means no server: each link runs workers of its own and leaves no
process behind). Its socket is in --server-dir ($XDG_RUNTIME_DIR/thindist, else
/tmp/thindist-UID), a directory that must be the user's alone; other users'
connections are refused. A link of another thindist or worker build replaces
the server. See docs/worker.md.

`

func newServerFlags(cfg *config.Config, asJSON *bool) *config.FlagSet {
	fs := config.NewFlagSet("thindist server")
	fs.Bool(asJSON, "json", "Server", false, "with status: print it as JSON")
	fs.CommandOnly("json")
	cfg.Register(fs)
	return fs
}

func serverUsage(w io.Writer) {
	var cfg config.Config
	var asJSON bool
	helpOwnFlags(w, serverIntro, newServerFlags(&cfg, &asJSON))
}

// serverCmd runs `thindist server status|stop`, and `thindist server run`,
// which a link starts (not for users: not in the help).
func serverCmd(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
	if wantsHelp(args) {
		serverUsage(stdout)
		return 0
	}
	var cfg config.Config
	var asJSON bool
	fs := newServerFlags(&cfg, &asJSON)
	if code := parseFlags("thindist server", fs, &cfg, args, env, serverUsage); code >= 0 {
		return code
	}
	sub := fs.Args()
	if len(sub) == 1 && sub[0] != "run" {
		if code := unknownSubcommand("thindist server", sub[0], []string{"status", "stop"}, env); code >= 0 {
			return code
		}
	}
	if len(sub) != 1 || (sub[0] != "status" && sub[0] != "stop" && sub[0] != "run") || asJSON && sub[0] != "status" {
		fmt.Fprintf(env.Stderr, "usage: thindist server status [--json] | stop\nRun 'thindist server --help' for more.\n")
		return 2
	}
	dir := pipeline.ServerDir(&cfg, env)
	switch sub[0] {
	case "run":
		return serverRun(ctx, &cfg, dir, env)
	case "stop":
		pid, err := workerserver.Stop(dir, 10*time.Second)
		switch {
		case errors.Is(err, workerserver.ErrNoServer):
			fmt.Fprintf(stdout, "no server running (socket %s)\n", workerserver.Socket(dir))
		case err != nil:
			fmt.Fprintf(env.Stderr, "thindist server stop: %v\n", err)
			return 1
		default:
			fmt.Fprintf(stdout, "stopped the server (pid %d) and its workers\n", pid)
		}
		return 0
	}
	st, err := workerserver.QueryStatus(dir)
	switch {
	case errors.Is(err, workerserver.ErrNoServer):
		if asJSON {
			fmt.Fprintln(stdout, "null")
		} else {
			fmt.Fprintf(stdout, "no server running (socket %s)\n", workerserver.Socket(dir))
		}
		return 0
	case err != nil:
		fmt.Fprintf(env.Stderr, "thindist server status: %v\n", err)
		return 1
	case asJSON:
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	default:
		writeServerStatus(stdout, st)
	}
	return 0
}

// serverRun runs the server (`thindist server run`) until it exits.
func serverRun(ctx context.Context, cfg *config.Config, dir string, env pipeline.Env) int {
	path := pipeline.WorkerPath(cfg, func(f string, a ...any) { fmt.Fprintf(env.Stderr, "thindist server: "+f+"\n", a...) })
	idle := cfg.ServerIdle(env.Getenv)
	if path == "" || idle <= 0 {
		fmt.Fprintf(env.Stderr, "thindist server run: needs a worker (--worker) and an idle period above 0 (--worker-idle)\n")
		return 2
	}
	workerserver.CloseInherited()
	// In the session of the link that started it (workerserver's spawn):
	// the end of that session's terminal must not end it.
	signal.Ignore(syscall.SIGHUP)
	if err := workerserver.Serve(ctx, workerserver.Options{Dir: dir, Worker: path, Idle: idle}); err != nil {
		fmt.Fprintf(env.Stderr, "thindist server run: %v\n", err)
		return 1
	}
	return 0
}

func writeServerStatus(w io.Writer, st *workerserver.Status) {
	fmt.Fprintf(w, "server:    pid %d, up %s (since %s), idle period %s\n", st.PID, st.Uptime,
		st.Started.Local().Format("2006-01-02 15:04:05"), st.Idle)
	fmt.Fprintf(w, "socket:    %s (log %s)\n", st.Socket, st.Log)
	fmt.Fprintf(w, "thindist:  %s, %s\n", st.Identity.Version, st.Identity.Thindist)
	fmt.Fprintf(w, "worker:    %s\n", st.Identity.Worker)
	fmt.Fprintf(w, "workers:   %d idle, %d busy; %d started, %d recycled\n", st.Workers.Idle, st.Workers.Busy, st.Workers.Started, st.Workers.Recycled)
	servers := "fork servers"
	if st.ForkServers == 1 {
		servers = "fork server"
	}
	fmt.Fprintf(w, "forks:     %d %s for the jobs no worker takes; %d jobs forked\n", st.ForkServers, servers, st.Forked)
	fmt.Fprintf(w, "served:    %d jobs on workers, %d links; %d connections open", st.Workers.Jobs, st.Links, st.Connections)
	if st.Refused > 0 {
		fmt.Fprintf(w, ", %d of other users refused", st.Refused)
	}
	fmt.Fprintln(w)
	if st.Exiting != "" {
		fmt.Fprintf(w, "exiting:   %s\n", st.Exiting)
	}
	if len(st.Compilers) == 0 {
		fmt.Fprintf(w, "compilers: none checked yet\n")
	}
	for i, c := range st.Compilers {
		verdict := "on the workers"
		if c.Why != "" {
			verdict = "not on the workers: " + c.Why
		}
		name := c.Compiler
		if c.File != c.Compiler {
			name += " (" + c.File + ")"
		}
		fmt.Fprintf(w, "%s%s: %s\n", [2]string{"compilers: ", "           "}[min(i, 1)], name, verdict)
	}
}
