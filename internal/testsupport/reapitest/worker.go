package reapitest

// The fake worker: running an action in a fresh execution root, from its
// input root in the CAS to its outputs stored back there.

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// run executes the action in a fresh directory and returns the response.
// Failures of the fake itself are reported in ExecuteResponse.status. If
// cpu is not nil, it receives the CPU time the command took (user and
// system, of the children it waited for too).
func (s *FakeServer) run(ctx context.Context, instance string, action *repb.Action, command *repb.Command, cpu *time.Duration) *repb.ExecuteResponse {
	s.executions.Add(1)
	meta := &repb.ExecutedActionMetadata{Worker: WorkerName}
	now := func() *timestamppb.Timestamp { return timestamppb.Now() }
	meta.QueuedTimestamp = now()
	meta.WorkerStartTimestamp = now()
	fail := func(err error) *repb.ExecuteResponse {
		meta.WorkerCompletedTimestamp = now()
		return &repb.ExecuteResponse{
			Status: StatusOf(err),
			Result: &repb.ActionResult{ExitCode: -1, ExecutionMetadata: meta},
		}
	}

	root, err := os.MkdirTemp(s.execRootParent(), "reapitest-exec-")
	if err != nil {
		return fail(status.Errorf(codes.Internal, "mkdtemp: %v", err))
	}
	if !s.opts.KeepExecRoots {
		defer os.RemoveAll(root)
	}

	meta.InputFetchStartTimestamp = now()
	var missing []*repb.Digest
	if err := s.materialize(root, action.GetInputRootDigest(), &missing); err != nil {
		return fail(err)
	}
	if len(missing) > 0 {
		return fail(MissingBlobsError(missing))
	}
	meta.InputFetchCompletedTimestamp = now()

	cwd, outputs, err := prepareWorkingDir(root, command)
	if err != nil {
		return fail(err)
	}
	env, pathVar := commandEnv(command)
	args := command.GetArguments()
	var attr *syscall.SysProcAttr
	var prog string
	dir := cwd
	if s.opts.Chroot {
		wd := command.GetWorkingDirectory()
		if s.opts.ChrootEnv {
			prog, args = chrootEnv, append([]string{chrootEnv, "--"}, args...)
		} else {
			prog, err = chrootProgram(args[0], wd)
		}
		attr, dir = chrootAttr(root), path.Join("/", wd)
	} else {
		prog, err = resolveProgram(args[0], cwd, pathVar)
	}
	if err != nil {
		return fail(err)
	}

	result, respStatus, stdout, stderr, err := runCommand(ctx, action, prog, args, env, dir, attr, meta, cpu)
	if err != nil {
		return fail(err)
	}

	meta.OutputUploadStartTimestamp = now()
	for _, o := range outputs {
		rel, _ := relPath(o, false)
		if err := s.collectOutput(result, cwd, rel); err != nil {
			return fail(err)
		}
	}
	result.StdoutDigest = s.cas.put(stdout)
	result.StderrDigest = s.cas.put(stderr)
	meta.OutputUploadCompletedTimestamp = now()
	meta.WorkerCompletedTimestamp = now()
	return &repb.ExecuteResponse{Result: result, Status: StatusOf(respStatus)}
}

// prepareWorkingDir creates command's working directory under root and
// the parent directory of each of its outputs; it returns the working
// directory and the outputs (OutputPaths, else the REAPI v2.0 files and
// directories), validated as clean relative paths.
func prepareWorkingDir(root string, command *repb.Command) (cwd string, outputs []string, err error) {
	wd, err := relPath(command.GetWorkingDirectory(), true)
	if err != nil {
		return "", nil, err
	}
	cwd = filepath.Join(root, filepath.FromSlash(wd))
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return "", nil, status.Errorf(codes.Internal, "working directory: %v", err)
	}
	outputs = command.GetOutputPaths()
	if len(outputs) == 0 {
		outputs = append(append([]string{}, command.GetOutputFiles()...), command.GetOutputDirectories()...)
	}
	for _, o := range outputs {
		rel, err := relPath(o, false)
		if err != nil {
			return "", nil, err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(cwd, filepath.FromSlash(rel))), 0o755); err != nil {
			return "", nil, status.Errorf(codes.Internal, "output parent: %v", err)
		}
	}
	return cwd, outputs, nil
}

// commandEnv returns command's environment, which is all the command
// gets, and the PATH its program is looked up in: its own, else the
// server's.
func commandEnv(command *repb.Command) (env []string, pathVar string) {
	env = []string{}
	hasPath := false
	for _, v := range command.GetEnvironmentVariables() {
		env = append(env, v.GetName()+"="+v.GetValue())
		if v.GetName() == "PATH" {
			pathVar, hasPath = v.GetValue(), true
		}
	}
	if !hasPath {
		pathVar = os.Getenv("PATH")
	}
	return env, pathVar
}

// runCommand runs prog with args and env in cwd, bounded by the action's
// timeout, and returns its result (exit code and meta, outputs not yet
// collected), the response status (DEADLINE_EXCEEDED for a timeout,
// UNAVAILABLE when ctx ended) and what it printed. err is set when prog
// could not be started.
func runCommand(ctx context.Context, action *repb.Action, prog string, args, env []string, cwd string, attr *syscall.SysProcAttr,
	meta *repb.ExecutedActionMetadata, cpu *time.Duration) (result *repb.ActionResult, respStatus error, stdout, stderr []byte, err error) {
	runCtx := ctx
	if t := action.GetTimeout(); t != nil && t.AsDuration() > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, t.AsDuration())
		defer cancel()
	}
	var outBuf, errBuf bytes.Buffer
	cmd := exec.CommandContext(runCtx, prog)
	cmd.Args = append([]string{}, args...)
	cmd.Env = env
	cmd.Dir = cwd
	cmd.SysProcAttr = attr
	cmd.Stdout = &outBuf
	cmd.Stderr = &errBuf
	cmd.WaitDelay = 2 * time.Second

	meta.ExecutionStartTimestamp = timestamppb.Now()
	runErr := cmd.Run()
	meta.ExecutionCompletedTimestamp = timestamppb.Now()
	if cpu != nil && cmd.ProcessState != nil {
		*cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}

	result = &repb.ActionResult{ExecutionMetadata: meta}
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exitErr):
		result.ExitCode = int32(exitErr.ExitCode())
	default:
		if cmd.ProcessState == nil {
			return nil, nil, nil, nil, status.Errorf(codes.InvalidArgument, "reapitest: cannot start %q: %v", args[0], runErr)
		}
		result.ExitCode = int32(cmd.ProcessState.ExitCode())
	}
	if runCtx.Err() != nil {
		if ctx.Err() != nil {
			respStatus = status.Error(codes.Unavailable, "reapitest: server stopped during execution")
		} else {
			respStatus = status.Errorf(codes.DeadlineExceeded, "reapitest: action timed out after %v", action.GetTimeout().AsDuration())
		}
		if result.ExitCode == 0 {
			result.ExitCode = -1
		}
	}
	return result, respStatus, outBuf.Bytes(), errBuf.Bytes(), nil
}

// relPath validates a slash-separated path relative to the input root or
// working directory: no absolute paths, no "..", no "." components.
func relPath(p string, allowEmpty bool) (string, error) {
	if p == "" {
		if allowEmpty {
			return "", nil
		}
		return "", status.Error(codes.InvalidArgument, "empty output path")
	}
	if strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", status.Errorf(codes.InvalidArgument, "path %q is not a clean relative path inside the root", p)
	}
	return p, nil
}

func checkName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
		return status.Errorf(codes.InvalidArgument, "invalid directory entry name %q", n)
	}
	return nil
}

// materialize writes the Directory tree d into dst (which exists).
func (s *FakeServer) materialize(dst string, d *repb.Digest, missing *[]*repb.Digest) error {
	data, ok := s.cas.get(d)
	if !ok {
		*missing = append(*missing, d)
		return nil
	}
	dir := &repb.Directory{}
	if err := proto.Unmarshal(data, dir); err != nil {
		return status.Errorf(codes.InvalidArgument, "blob %s is not a Directory: %v", DigestKey(d), err)
	}
	for _, f := range dir.GetFiles() {
		if err := checkName(f.GetName()); err != nil {
			return err
		}
		content, ok := s.cas.get(f.GetDigest())
		if !ok {
			*missing = append(*missing, f.GetDigest())
			continue
		}
		mode := fs.FileMode(0o644)
		if f.GetIsExecutable() {
			mode = 0o755
		}
		p := filepath.Join(dst, f.GetName())
		if s.opts.Chroot {
			if err := s.links.place(s.execRootParent(), p, DigestKey(f.GetDigest()), content, mode); err != nil {
				return status.Errorf(codes.Internal, "link input: %v", err)
			}
			continue
		}
		if err := os.WriteFile(p, content, mode); err != nil {
			return status.Errorf(codes.Internal, "write input: %v", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return status.Errorf(codes.Internal, "chmod input: %v", err)
		}
	}
	for _, sub := range dir.GetDirectories() {
		if err := checkName(sub.GetName()); err != nil {
			return err
		}
		p := filepath.Join(dst, sub.GetName())
		if err := os.Mkdir(p, 0o755); err != nil {
			return status.Errorf(codes.InvalidArgument, "input directory %q: %v", sub.GetName(), err)
		}
		if err := s.materialize(p, sub.GetDigest(), missing); err != nil {
			return err
		}
	}
	for _, l := range dir.GetSymlinks() {
		if err := checkName(l.GetName()); err != nil {
			return err
		}
		if err := os.Symlink(l.GetTarget(), filepath.Join(dst, l.GetName())); err != nil {
			return status.Errorf(codes.InvalidArgument, "input symlink %q: %v", l.GetName(), err)
		}
	}
	return nil
}

// resolveProgram implements the REAPI rule for arguments[0]: absolute, relative
// to the working directory, or looked up in PATH.
func resolveProgram(name, cwd, pathVar string) (string, error) {
	if filepath.IsAbs(name) {
		return name, nil
	}
	if strings.ContainsRune(name, '/') {
		return filepath.Join(cwd, filepath.FromSlash(name)), nil
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", status.Errorf(codes.InvalidArgument, "reapitest: %q not found in PATH %q", name, pathVar)
}

// collectOutput adds the output at rel (relative to cwd) to result, storing
// its contents in the CAS. Absent outputs are skipped, as the spec allows.
func (s *FakeServer) collectOutput(result *repb.ActionResult, cwd, rel string) error {
	full := filepath.Join(cwd, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "output %q: %v", rel, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return status.Errorf(codes.Internal, "output %q: %v", rel, err)
		}
		result.OutputSymlinks = append(result.OutputSymlinks, &repb.OutputSymlink{Path: rel, Target: target})
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(full)
		if err != nil {
			return status.Errorf(codes.Internal, "output %q: %v", rel, err)
		}
		result.OutputFiles = append(result.OutputFiles, &repb.OutputFile{
			Path:         rel,
			Digest:       s.cas.put(data),
			IsExecutable: fi.Mode()&0o111 != 0,
		})
	case fi.IsDir():
		tree := &repb.Tree{}
		root, err := s.dirToProto(full, &tree.Children)
		if err != nil {
			return err
		}
		tree.Root = root
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(tree)
		if err != nil {
			return status.Errorf(codes.Internal, "marshal tree: %v", err)
		}
		result.OutputDirectories = append(result.OutputDirectories, &repb.OutputDirectory{
			Path:       rel,
			TreeDigest: s.cas.put(data),
		})
	}
	return nil
}

// dirToProto converts the directory at p to a Directory message, storing file
// contents and child Directory messages in the CAS and appending children.
func (s *FakeServer) dirToProto(p string, children *[]*repb.Directory) (*repb.Directory, error) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "output directory: %v", err)
	}
	dir := &repb.Directory{}
	for _, e := range entries { // sorted by name
		full := filepath.Join(p, e.Name())
		fi, err := os.Lstat(full)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "output directory: %v", err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "output directory: %v", err)
			}
			dir.Symlinks = append(dir.Symlinks, &repb.SymlinkNode{Name: e.Name(), Target: target})
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(full)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "output directory: %v", err)
			}
			dir.Files = append(dir.Files, &repb.FileNode{Name: e.Name(), Digest: s.cas.put(data), IsExecutable: fi.Mode()&0o111 != 0})
		case fi.IsDir():
			sub, err := s.dirToProto(full, children)
			if err != nil {
				return nil, err
			}
			data, err := proto.MarshalOptions{Deterministic: true}.Marshal(sub)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "marshal directory: %v", err)
			}
			*children = append(*children, sub)
			dir.Directories = append(dir.Directories, &repb.DirectoryNode{Name: e.Name(), Digest: s.cas.put(data)})
		}
	}
	return dir, nil
}
