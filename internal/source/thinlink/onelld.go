// Steps 2 to 4 in one linker process, for lld 21 and later: lld's own
// distributed ThinLTO (DTLTO), with this process as its distributor.

package thinlink

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/source/jobfile"
)

// firstDTLTO is the first lld major version with --thinlto-distributor.
const firstDTLTO = 21

// oneLLD reports whether the link runs as one lld process (linkOnce).
func (p *plan) oneLLD() bool {
	if p.opts.SeparateThinLink || p.opts.KeepWorkDir {
		return false
	}
	n, err := strconv.Atoi(p.lldMajorVersion)
	return err == nil && n >= firstDTLTO
}

// relay is the distributor lld runs (with /bin/sh -c): it passes the job
// file's path to this process through descriptor 3 and exits with the
// status it reads back from descriptor 4. Only this process holds the
// other ends of both pipes, so if it has died the write fails (SIGPIPE) or
// the read finds the end of the file, and lld reports a failed distributor
// instead of waiting for good. A shell starts in about a millisecond, where
// a second thindist would cost its whole start on every link.
const relay = `printf '%s\n' "$1" >&3 && read -r s <&4 && exit "$s"; exit 1`

// linkOnce links in one lld process: the link command of the separate
// flow's thin link (linkArgs), with lld's DTLTO pointed at the relay. When
// lld has written its job file, the relay hands it over; its jobs become
// this link's backends, run as in the separate flow (the same commands,
// built by actions), and lld then links their objects itself, as its
// in-process ThinLTO would. The thin link's and the final link's times are
// the time until lld asks and after it is answered.
func (p *plan) linkOnce(ctx context.Context, res *Result) error {
	compiler, err := p.compiler()
	if err != nil {
		return &Error{Step: "preparing the backend compilations", Err: err}
	}
	args := p.linkArgs()
	for _, f := range []string{"--thinlto-distributor=/bin/sh", "--thinlto-distributor-arg=-c",
		"--thinlto-distributor-arg=" + relay, "--thinlto-distributor-arg=thindist",
		"--thinlto-remote-compiler=" + compiler} {
		args = append(args, p.line.wrap(f)...)
	}
	rsp := filepath.Join(p.work, "link.rsp")
	if err := writeResponseFile(p.abs(rsp), args); err != nil {
		return &Error{Step: "writing the link's response file", Err: err}
	}
	cmd := []string{p.line.compiler, "@" + rsp}
	res.ThinLink, res.Final = cmd, cmd

	reqR, reqW, err := os.Pipe()
	if err != nil {
		return &Error{Step: "starting the link", Err: err}
	}
	defer reqR.Close()
	defer reqW.Close()
	respR, respW, err := os.Pipe()
	if err != nil {
		return &Error{Step: "starting the link", Err: err}
	}
	defer respR.Close()
	defer respW.Close()

	type exit struct {
		out string
		err error
	}
	exited := make(chan exit, 1)
	// lld writes its standard output (a map, --print-...) while thindist
	// writes messages: a writer that is not a file is given lld's output
	// once lld is done, so that the two never write to it at once.
	stdout, later := p.opts.Stdout, &bytes.Buffer{}
	if _, ok := stdout.(*os.File); !ok {
		stdout = later
	}
	endPhase := p.opts.phase("thin link")
	go func() {
		out, err := p.runWith(ctx, cmd, stdout, []*os.File{reqW, respR})
		p.opts.Stdout.Write(later.Bytes())
		exited <- exit{out, err}
	}()
	requests, done := make(chan string), make(chan struct{})
	defer close(done)
	go func() {
		defer close(requests)
		sc := bufio.NewScanner(reqR)
		for sc.Scan() {
			select {
			case requests <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	var runErr error
	for {
		select {
		case path, ok := <-requests:
			if !ok {
				requests = nil
				continue
			}
			endPhase()
			runErr = p.distribute(ctx, res, path)
			status := "0\n"
			if runErr != nil {
				status = "1\n"
			}
			io.WriteString(respW, status)
			endPhase = p.opts.phase("final link")
		case e := <-exited:
			endPhase()
			e.out = p.readable(e.out)
			if runErr != nil {
				return runErr
			}
			if e.err != nil {
				return &Error{Step: "the link (lld, with thindist as its DTLTO distributor)",
					Err: fmt.Errorf("%w\n  command: %s", e.err, action.ShellQuote(cmd)), Output: e.out}
			}
			io.WriteString(p.opts.Stderr, e.out) // the linker's warnings
			return nil
		}
	}
}

// distribute runs the jobs of lld's job file at path as the link's
// backends. Every job must be a module thindist put on the link line.
func (p *plan) distribute(ctx context.Context, res *Result, path string) error {
	fromJobs := func() ([]backend, error) {
		f, err := jobfile.Load(p.abs(path), p.opts.Dir)
		if err != nil {
			return nil, err
		}
		var bs []backend
		for _, a := range f.Actions {
			m := p.modules[a.Inputs[0].Path]
			if m == nil {
				return nil, fmt.Errorf("lld asked for the backend of %q, which is not a module thindist put on the link line "+
					"under that path", a.Inputs[0].Path)
			}
			m.linked = true
			m.Native = a.Outputs[0].Path
			b := backend{m: m, shard: a.Inputs[1].Path}
			for _, in := range a.Inputs[2:] {
				if in.Role == action.RoleImport {
					b.imports = append(b.imports, in.Path)
				}
			}
			bs = append(bs, b)
			res.Modules = append(res.Modules, m)
		}
		return bs, nil
	}
	return p.backends(ctx, res, fromJobs)
}
