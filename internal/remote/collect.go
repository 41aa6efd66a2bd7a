package remote

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/digest"
)

// collect checks the result against the declared outputs and downloads
// them, counting what it reads in m. Any deviation is an error: nothing
// undeclared is written.
func (e *Executor) collect(ctx context.Context, m Meter, a *action.Action, ex *reapi.Executable, resp *repb.ExecuteResponse, out []string) (*executor.Result, error) {
	ar := resp.GetResult()
	if ar == nil {
		return nil, errors.New("the response holds no result")
	}
	got, err := declaredOutputs(ar, ex.Outputs)
	if err != nil {
		return nil, err
	}
	res := &executor.Result{Provenance: executor.Provenance{Where: executor.Remote}, Exit: proc.Exit{ExitCode: int(ar.ExitCode)},
		Ran: ex.Command.GetArguments(), RanDir: ex.Command.GetWorkingDirectory()}
	if resp.CachedResult {
		res.Where = executor.RemoteCache
		e.serverCacheHits.Add(1)
	} else {
		e.executed.Add(1)
	}
	md := ar.GetExecutionMetadata()
	if s, c := md.GetExecutionStartTimestamp(), md.GetExecutionCompletedTimestamp(); s != nil && c != nil {
		res.CPU = c.AsTime().Sub(s.AsTime())
	}
	// Read stderr, stdout and the outputs together: small ones in one
	// batch, as many round trips as the batch limit requires.
	var want []digest.Digest
	std := func(raw []byte, p *repb.Digest) (*digest.Digest, error) {
		if len(raw) > 0 || p == nil {
			return nil, nil
		}
		d, err := digest.FromProto(p)
		if err != nil {
			return nil, err
		}
		want = append(want, d)
		return &d, nil
	}
	stderrD, err := std(ar.StderrRaw, ar.StderrDigest)
	if err != nil {
		return nil, fmt.Errorf("stderr: %v", err)
	}
	stdoutD, err := std(ar.StdoutRaw, ar.StdoutDigest)
	if err != nil {
		return nil, fmt.Errorf("stdout: %v", err)
	}
	res.Stderr, res.Stdout = ar.StderrRaw, ar.StdoutRaw
	failed := ar.ExitCode != 0
	outD := make([]digest.Digest, len(got))
	if !failed {
		for i, f := range got {
			if f == nil {
				return nil, fmt.Errorf("the result lacks output %s (%s)", ex.Outputs[i], a.Outputs[i].Path)
			}
			d, err := digest.FromProto(f.Digest)
			if err != nil {
				return nil, fmt.Errorf("output %s: %v", f.Path, err)
			}
			outD[i] = d
			if f.Contents != nil && int64(len(f.Contents)) == d.Size {
				if digest.OfBytes(f.Contents) != d {
					return nil, fmt.Errorf("output %s: inlined contents do not match the digest", f.Path)
				}
				continue
			}
			want = append(want, d)
		}
	}
	blobs, err := e.c.ReadBlobs(ctx, m, want)
	if err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	if stderrD != nil {
		res.Stderr = blobs[*stderrD]
	}
	if stdoutD != nil {
		res.Stdout = blobs[*stdoutD]
	}
	if res.Failed() {
		return res, nil // Verified reports it; its outputs do not matter
	}
	for i, f := range got {
		d := outD[i]
		data, ok := blobs[d]
		if !ok {
			data = f.Contents
		}
		if err := writeFile(out[i], data); err != nil {
			return nil, err
		}
		e.c.CAS.MarkPresent(d)
		if i == 0 {
			// Checked here, from memory; if not well formed, Verified
			// reads the file and reports it.
			res.ObjectChecked = executor.CheckObjectBytes(data) == nil
		}
	}
	res.OutputDigests = outD // each verified above (inline) or by ReadBlobs
	return res, nil
}

// declaredOutputs are ar's output files in the order of outputs, the
// paths the action declares (nil where ar lacks one); anything else in
// ar, undeclared or not a plain file, is an error.
func declaredOutputs(ar *repb.ActionResult, outputs []string) ([]*repb.OutputFile, error) {
	if len(ar.OutputDirectories)+len(ar.OutputSymlinks)+len(ar.OutputFileSymlinks)+len(ar.OutputDirectorySymlinks) > 0 {
		return nil, errors.New("the result names directories or symlinks, which the action does not declare")
	}
	declared := map[string]int{}
	for i, p := range outputs {
		declared[p] = i
	}
	got := make([]*repb.OutputFile, len(outputs))
	for _, f := range ar.OutputFiles {
		if err := reapi.CheckOutputPath(f.Path); err != nil {
			return nil, err
		}
		i, ok := declared[f.Path]
		if !ok {
			return nil, fmt.Errorf("the result names %q, which the action does not declare", f.Path)
		}
		got[i] = f
	}
	return got, nil
}

func (e *Executor) stdio(ctx context.Context, raw []byte, p *repb.Digest) ([]byte, error) {
	if len(raw) > 0 || p == nil {
		return raw, nil
	}
	d, err := digest.FromProto(p)
	if err != nil {
		return nil, err
	}
	return e.c.ReadBytes(ctx, nil, d)
}

// writeFile writes an output or a blob to dst, an executor's output path:
// a name private to the run until its caller renames it into place
// (executor.Executor), so it is written once, directly (a temporary file
// and a rename cost another file creation and rename per output). It
// replaces dst rather than write into it: dst may be a hard link into the
// local cache, placed by a cache hit that was then not used (its other
// outputs were missing), and writing through it would change the cached
// blob.
func writeFile(dst string, data []byte) error {
	err := atomicfile.WritePrivate(dst, data, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = atomicfile.WritePrivate(dst, data, 0o644)
		}
	}
	return err
}
