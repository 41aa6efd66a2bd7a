package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/workerserver"
	"github.com/thindist/thindist/internal/pipeline"
)

const serverIntro = `Usage:
  thindist server status [--json]   every worker server of the user's, one per
                                    installation of thindist: its directory,
                                    pid, uptime, idle period, thindist and
                                    worker, workers idle and busy, jobs and
                                    links served, and each compiler checked
                                    with the verdict
  thindist server stop [--all]      end this thindist's server and its workers
                                    (--all: every server of the user's; links
                                    running rerun their jobs by exec)

A link keeps its backend workers warm in a server of the user's (one per
installation: the thindist executable and its worker): started on demand by the
first link that has a worker, reused by the next, gone after --worker-idle
without a link (default 5m; 0, or the environment variable CI set, means no
server: each link runs workers of its own and leaves no process behind). Its
socket is in a directory of its own in --server-dir ($XDG_RUNTIME_DIR/thindist,
else /tmp/thindist-UID), a directory that must be the user's alone; other users'
connections are refused. A link of a rebuilt thindist or worker at the same
path replaces its installation's server, never another installation's. See
docs/worker.md.

`

func newServerFlags(cfg *config.Config, asJSON, all *bool) *config.FlagSet {
	fs := config.NewFlagSet("thindist server")
	fs.Bool(asJSON, "json", "Server", false, "with status: print it as JSON (a list, one server an installation)")
	fs.Bool(all, "all", "Server", false, "with stop: stop every server of the user's, not only this thindist's")
	fs.CommandOnly("json")
	fs.CommandOnly("all")
	cfg.Register(fs)
	return fs
}

func serverUsage(w io.Writer) {
	var cfg config.Config
	var asJSON, all bool
	helpOwnFlags(w, serverIntro, newServerFlags(&cfg, &asJSON, &all))
}

// serverCmd runs `thindist server status|stop`, and `thindist server run`,
// which a link starts (not for users: not in the help).
func serverCmd(ctx context.Context, args []string, env pipeline.Env, stdout io.Writer) int {
	if wantsHelp(args) {
		serverUsage(stdout)
		return 0
	}
	var cfg config.Config
	var asJSON, all bool
	fs := newServerFlags(&cfg, &asJSON, &all)
	if code := parseFlags("thindist server", fs, &cfg, args, env, serverUsage); code >= 0 {
		return code
	}
	sub := fs.Args()
	if len(sub) == 1 && sub[0] != "run" {
		if code := unknownSubcommand("thindist server", sub[0], []string{"status", "stop"}, env); code >= 0 {
			return code
		}
	}
	if len(sub) != 1 || (sub[0] != "status" && sub[0] != "stop" && sub[0] != "run") || asJSON && sub[0] != "status" || all && sub[0] != "stop" {
		fmt.Fprintf(env.Stderr, "usage: thindist server status [--json] | stop [--all]\nRun 'thindist server --help' for more.\n")
		return 2
	}
	dir := pipeline.ServerDir(&cfg, env)
	if sub[0] == "run" {
		return serverRun(ctx, &cfg, dir, env)
	}
	sts, err := workerserver.List(dir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "thindist server %s: %v\n", sub[0], err)
	}
	exe := env.Self
	if exe == "" {
		exe, _ = os.Executable()
	}
	self, serr := workerserver.Resolved(exe)
	mine := func(st *workerserver.Status) bool { return serr == nil && st.Identity.Thindist.Path == self }
	if sub[0] == "stop" {
		return serverStop(sts, all, mine, dir, self, env, stdout, err)
	}
	switch {
	case asJSON:
		if sts == nil {
			sts = []*workerserver.Status{}
		}
		b, _ := json.MarshalIndent(sts, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	case len(sts) == 0:
		fmt.Fprintf(stdout, "no server running in %s\n", dir)
	}
	for i, st := range sts {
		if asJSON {
			break
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeServerStatus(stdout, st, mine(st))
	}
	if err != nil {
		return 1
	}
	return 0
}

// serverStop stops the servers of sts that are this thindist's (mine), or
// all of them, and says which it stopped and which it left running.
func serverStop(sts []*workerserver.Status, all bool, mine func(*workerserver.Status) bool, dir, self string,
	env pipeline.Env, stdout io.Writer, listErr error) int {
	code, stopped, left := 0, 0, 0
	if listErr != nil {
		code = 1
	}
	for _, st := range sts {
		if !all && !mine(st) {
			left++
			continue
		}
		pid, err := workerserver.Stop(st.Dir, 10*time.Second)
		switch {
		case errors.Is(err, workerserver.ErrNoServer):
		case err != nil:
			fmt.Fprintf(env.Stderr, "thindist server stop: %v\n", err)
			code = 1
		default:
			stopped++
			fmt.Fprintf(stdout, "stopped the server (pid %d) of %s and its workers\n", pid, st.Identity.Thindist.Path)
		}
	}
	if stopped == 0 && code == 0 {
		if all {
			fmt.Fprintf(stdout, "no server running in %s\n", dir)
		} else {
			fmt.Fprintf(stdout, "no server of %s running in %s\n", self, dir)
		}
	}
	if left > 0 {
		servers := "servers"
		if left == 1 {
			servers = "server"
		}
		fmt.Fprintf(stdout, "left running: %d %s of other installations of thindist (thindist server status lists them; --all stops them)\n", left, servers)
	}
	return code
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

// writeServerStatus prints st; mine says it is the server of this
// thindist.
func writeServerStatus(w io.Writer, st *workerserver.Status, mine bool) {
	whose := ""
	if mine {
		whose = " (this thindist's)"
	}
	fmt.Fprintf(w, "server:    pid %d, up %s (since %s), idle period %s%s\n", st.PID, st.Uptime,
		st.Started.Local().Format("2006-01-02 15:04:05"), st.Idle, whose)
	fmt.Fprintf(w, "socket:    %s (log %s)\n", st.Socket, st.Log)
	fmt.Fprintf(w, "thindist:  %s, %s\n", st.Identity.Version, st.Identity.Thindist)
	fmt.Fprintf(w, "worker:    %s\n", st.Identity.Worker)
	fmt.Fprintf(w, "workers:   %d idle, %d busy or lent to links; %d started, %d recycled\n", st.Workers.Idle, st.Workers.Busy, st.Workers.Started, st.Workers.Recycled)
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
