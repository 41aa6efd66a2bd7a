package reapi

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// Stable names, relative to the working directory, of the files whose
// local names carry lld's PID. They make the executable Action's digest
// repeat across links (the shard's bytes do too, for plain objects).
const (
	StableDir   = ".thindist"
	StableIndex = StableDir + "/index.thinlto.bc"
)

// StableOutput is output i's path, relative to the working directory, in
// the executable action.
func StableOutput(i int) string { return StableDir + "/out/" + strconv.Itoa(i) + ".o" }

// ExecOptions shapes the executable Action.
type ExecOptions struct {
	// Files memoises input digests.
	Files *digest.Files
	// Compiler replaces Args[0] (the compiler's path on the workers); ""
	// keeps the local path.
	Compiler string
	// Platform properties, sorted by name then value.
	Platform *repb.Platform
	// Env is the command's whole environment (fixed, so the digest does not
	// depend on the developer's shell). Sorted by name.
	Env []*repb.Command_EnvironmentVariable
	// Timeout bounds the execution on the worker; 0 leaves it to the server.
	Timeout time.Duration
	// DoNotCache marks the Action do_not_cache: the server neither stores
	// its result nor merges it with an execution of the same action in
	// flight, and, the field being part of the Action, its digest is
	// another than the cacheable action's.
	DoNotCache bool
	// Shard, if not nil, is the action's index shard as already read (for
	// its cache key, executor.Job.Shard): the remote action is built from these
	// bytes instead of the file's.
	Shard []byte
	// Toolchain, if set, returns the compiler to ship in the input root
	// for the action's compiler (its Args[0]), nil for none: the command
	// then runs the shipped one instead of Compiler or the local path.
	Toolchain func(compiler string) *Shipped
}

// Executable is the Action a remote worker runs for a backend action.
type Executable struct {
	Action       *repb.Action
	ActionDigest digest.Digest
	Command      *repb.Command
	// Blobs holds the encoded Action, Command and Directory messages.
	Blobs map[digest.Digest][]byte
	// Files maps the digest of every input file to a local file holding it.
	Files map[digest.Digest]string
	// Outputs[i] is where output i appears in the ActionResult (relative to
	// the working directory, as OutputFile.path is).
	Outputs []string
	// Toolchain is the compiler shipped in the input root, nil for none.
	// Its messages and files are not in Blobs and Files: they are the
	// same for every action, and made present once (remote.Executor).
	Toolchain *Shipped
	// Priority is the execution's ExecutionPolicy priority: lower runs
	// sooner among the queued actions of a run (Buildbarn's scheduler
	// orders an invocation's queued operations so). Not part of the key.
	Priority int32
}

// Sizes returns the number and total size of the distinct blobs the action
// needs in the CAS.
func (e *Executable) Sizes() (n int, bytes int64) {
	for d := range e.Blobs {
		n, bytes = n+1, bytes+d.Size
	}
	for d := range e.Files {
		if _, ok := e.Blobs[d]; !ok {
			n, bytes = n+1, bytes+d.Size
		}
	}
	return
}

// BuildExecutable turns a into an executable Action: every module and
// import at the exact relative path the index shard records, below a
// working directory nested deep enough for ".." paths (action.Layout); the
// index shard and the outputs under the stable names above; the command
// rendered to match. Inputs named by absolute paths are relocated under
// RelocatedDir (when a module or an import is, every one of them is, in
// the order they sort: see relocation), and the shard that the worker gets
// is rewritten so that its module table names them there: the primary
// module in the command, the imports and the shard agree on the worker as
// they do here, and the worker imports in the order this machine would.
func BuildExecutable(a *action.Action, o ExecOptions) (*Executable, error) {
	shardIdx, shard, err := readShard(a, o)
	if err != nil {
		return nil, err
	}
	b, reloc, err := stableInputs(a, shard, o)
	if err != nil {
		return nil, err
	}
	if shardIdx >= 0 {
		rewritten, err := reloc.shard(shard)
		if err != nil {
			return nil, fmt.Errorf("index shard %s: %w", a.Inputs[shardIdx].Path, err)
		}
		if rewritten != nil {
			shard = rewritten
		}
	}
	layout, err := b.Layout()
	if err != nil {
		return nil, err
	}
	var tc *Shipped
	if o.Toolchain != nil {
		tc = o.Toolchain(a.Args[0].Text)
	}
	rootDigest, blobs, files, err := inputRoot(b, layout, shardIdx, shard, tc, o)
	if err != nil {
		return nil, err
	}

	outs := make([]string, len(a.Outputs))
	for i := range outs {
		outs[i] = StableOutput(i)
	}
	argv := b.Argv(func(i int) string { return b.Inputs[i].Path }, func(i int) string { return outs[i] })
	if o.Compiler != "" {
		argv[0] = o.Compiler
	}
	if tc != nil {
		argv = append(tc.Argv(rootFrom(layout.WorkDir)), argv[1:]...)
	}
	env := append([]*repb.Command_EnvironmentVariable(nil), o.Env...)
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	cmd := &repb.Command{
		Arguments:            argv,
		EnvironmentVariables: env,
		OutputPaths:          outs,
		WorkingDirectory:     layout.WorkDir,
		Platform:             o.Platform,
	}
	cmdDigest, cmdBytes, err := digest.OfMessage(cmd)
	if err != nil {
		return nil, err
	}
	blobs[cmdDigest] = cmdBytes
	act := &repb.Action{
		CommandDigest:   cmdDigest.Proto(),
		InputRootDigest: rootDigest.Proto(),
		Platform:        o.Platform,
		DoNotCache:      o.DoNotCache,
	}
	if o.Timeout > 0 {
		act.Timeout = durationpb.New(o.Timeout)
	}
	actDigest, actBytes, err := digest.OfMessage(act)
	if err != nil {
		return nil, err
	}
	blobs[actDigest] = actBytes
	return &Executable{Action: act, ActionDigest: actDigest, Command: cmd, Blobs: blobs, Files: files, Outputs: outs, Toolchain: tc}, nil
}

// readShard returns the index of a's index shard among its inputs (-1 if
// it has none) and its bytes: o.Shard, else the file's.
func readShard(a *action.Action, o ExecOptions) (int, []byte, error) {
	for i, in := range a.Inputs {
		if in.Role != action.RoleIndex {
			continue
		}
		// The shard goes to the CAS from memory, as a blob: read once,
		// for the key when there is one (o.Shard), and hashed once here
		// (a file input is hashed, then read again when uploaded; the
		// shard is new for every action, so it is always uploaded, and
		// nothing else shares its digest).
		if o.Shard != nil {
			return i, o.Shard, nil
		}
		shard, err := plainfile.ReadFile(a.Abs(in.Local()))
		if err != nil {
			return i, nil, fmt.Errorf("index shard %s: %w", in.Path, err)
		}
		return i, shard, nil
	}
	return -1, nil, nil
}

// stableInputs returns a copy of a whose inputs that need not keep their
// names (the shard, common inputs the command names by reference) have
// stable names, and whose inputs named by absolute paths are relocated
// (reloc records where), with every module and import when one of them is
// (so that they sort as before: see relocation). The inputs renamed read
// from their original files (Source). shard is a's index shard, nil if it
// has none.
func stableInputs(a *action.Action, shard []byte, o ExecOptions) (b *action.Action, reloc *relocation, err error) {
	// Inputs whose names need not be kept (the shard, common inputs the
	// command names by reference) move to stable names, so their absolute
	// or PID-bearing names neither leak nor prevent remote execution.
	c := *a
	b = &c
	b.Inputs = append([]action.Input(nil), a.Inputs...)
	referenced := map[int]bool{}
	for _, arg := range a.Args {
		if arg.Kind == action.InputRef {
			referenced[int(arg.Index)] = true
		}
	}
	reloc = newRelocation(a)
	if err := reloc.rankModules(shard); err != nil {
		return nil, nil, err
	}
	for i, in := range b.Inputs {
		var name string
		switch {
		case in.Role == action.RoleIndex:
			name = StableIndex
		case in.Role == action.RoleCommon && referenced[i]:
			name = StableDir + "/common/" + strconv.Itoa(i) + "/" + filepath.Base(in.Path)
		default:
			if _, ranked := reloc.ranked(in); !ranked && !filepath.IsAbs(in.Path) {
				continue
			}
			d, err := o.Files.Get(a.Abs(in.Local()))
			if err != nil {
				return nil, nil, fmt.Errorf("%s %s: %w", in.Role, in.Path, err)
			}
			name = reloc.name(in, d)
		}
		b.Inputs[i] = action.Input{Path: name, Source: a.Abs(in.Local()), Role: in.Role}
	}
	return b, reloc, nil
}

// inputRoot builds the input root of layout: its directories, the shard
// (from memory, among the blobs), every other input file (files: digest
// -> local path, to be uploaded from there) and the toolchain's subtree
// (tc, if not nil).
func inputRoot(b *action.Action, layout *action.Layout, shardIdx int, shard []byte, tc *Shipped, o ExecOptions) (root digest.Digest, blobs map[digest.Digest][]byte, files map[digest.Digest]string, err error) {
	tree := NewTree()
	tree.AddDir(layout.WorkDir)
	for _, d := range layout.Dirs {
		tree.AddDir(d)
	}
	files = map[digest.Digest]string{}
	var shardDigest digest.Digest
	for _, f := range layout.Files {
		if f.Input == shardIdx {
			shardDigest = digest.OfBytes(shard)
			if err := tree.AddFile(f.RootPath, shardDigest, false); err != nil {
				return root, nil, nil, err
			}
			continue
		}
		local := b.Abs(b.Inputs[f.Input].Local())
		d, err := o.Files.Get(local)
		if err != nil {
			return root, nil, nil, fmt.Errorf("%s %s: %w", b.Inputs[f.Input].Role, b.Inputs[f.Input].Path, err)
		}
		if err := tree.AddFile(f.RootPath, d, false); err != nil {
			return root, nil, nil, err
		}
		files[d] = local
	}
	if tc != nil {
		if err := tc.AddTo(tree); err != nil {
			return root, nil, nil, err
		}
	}
	root, blobs, err = tree.Build()
	if err != nil {
		return root, nil, nil, err
	}
	if shardIdx >= 0 {
		blobs[shardDigest] = shard
	}
	return root, blobs, files, nil
}

// Platform builds a sorted Platform message from name=value pairs; nil for
// none.
func Platform(props [][2]string) *repb.Platform {
	if len(props) == 0 {
		return nil
	}
	p := &repb.Platform{}
	for _, kv := range props {
		p.Properties = append(p.Properties, &repb.Platform_Property{Name: kv[0], Value: kv[1]})
	}
	sort.Slice(p.Properties, func(i, j int) bool {
		a, b := p.Properties[i], p.Properties[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Value < b.Value
	})
	return p
}

// CheckOutputPath reports whether p, an output path of an ActionResult,
// stays inside the working directory.
func CheckOutputPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || len(p) >= 3 && p[:3] == "../" {
		return fmt.Errorf("output path %q escapes the working directory", p)
	}
	return nil
}
