// Package reapi translates backend actions into Remote Execution API v2
// messages: the canonical Action whose digest is thindist's cache key (local
// and remote alike), and the executable Action a remote worker runs.
//
// # The cache key
//
// A key must repeat across links, checkouts and machines, and must never
// match two compilations that could produce different objects. lld names the
// index shard and the output after its PID ("t1.1.2487.native.o.thinlto.bc"),
// copies archive members out under PID-bearing names ("lib.a(m.o at 88).2.9A6.o")
// and writes those names into the importers' shards, so neither the raw
// command nor the raw shard bytes repeat. The key is therefore the digest of
// a canonical Action, never executed, built from what determines the object:
//
//   - Command.arguments: the command with every input and output named by its
//     role instead of its path: the index shard as "index.thinlto.bc", the
//     outputs as "out/<i>", a common input (a profile) as "common/<i>", and the
//     module being compiled as "modules/h<hash>" by the content hash the
//     shard's module table records for it, or "modules/<k>", k being its slot
//     in the table, when the hash is absent or shared. Which table entry is
//     the primary module decides what clang compiles (a module whose path is
//     not in the table compiles to an object with no symbols), so it is part
//     of the key; naming it by content keeps the key independent of the
//     table's order. The compiler is named by its base name as clang reads
//     it, without a version suffix ("clang-22" as "clang": driverName): its
//     identity is in the salt.
//   - The input root: "index.thinlto.bc" standing for the shard's
//     normalised digest (bitcode.NormalizedDigest: the shard with every
//     module path replaced by the module's content hash; the node is the
//     digest of those 32 bytes, never of the raw shard, whose length varies
//     with the length of lld's PID); each table entry's "modules/..." name
//     with the content digest of the file the backend will load for it, i.e.
//     the declared input
//     of that path, or the file at that path (absent files are recorded as
//     absent); the common inputs by content; and when the backend imports
//     from two modules or more, "import-order", standing for their names in
//     the byte order of their paths, the order in which LLVM imports from
//     them (addImportOrder).
//     A "-x ir" before the module is left out when clang reads the module
//     as bitcode without it (keyed): `thindist link` writes it, lld's
//     DTLTO does not, and the same backend must get the same key from
//     either.
//   - Command.environment_variables: the variables that change what clang
//     does whatever its arguments (CCC_OVERRIDE_OPTIONS and friends).
//   - Platform: the remote platform properties, so objects built for
//     different worker pools are never mixed.
//   - Action.salt: a format version and the compiler's identity (the content
//     digest of its executable, or a string the caller gives for a remote
//     toolchain: the workers' compiler, or the digest of the tree shipped to
//     them, libraries included), so a new compiler misses everywhere.
//
// Paths, PIDs and the working directory are left out because the object does
// not depend on them (measured with clang 22: the same object from every
// spelling and flow), but for the order in which the imported modules'
// paths sort, which is kept as that order.
package reapi

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// keyVersion changes whenever the key's construction does, so old entries
// miss instead of being misread.
const keyVersion = "thindist-key-v3"

// KeyEnv lists environment variables that change clang's behaviour whatever
// its arguments; their values are part of the key.
var KeyEnv = []string{"CCC_OVERRIDE_OPTIONS", "CLANG_SPAWN_CC1", "LLVM_PROFILE_FILE"}

// Keyer computes cache keys. One Keyer serves one run: it remembers file
// digests, so each input is read once however many actions share it.
type Keyer struct {
	// Files memoises input digests.
	Files *digest.Files
	// CompilerID returns the identity of a compiler executable.
	CompilerID func(path string) (string, error)
	// Platform properties of the actions (remote execution); may be nil.
	Platform *repb.Platform
	// Getenv reads the environment for KeyEnv.
	Getenv func(string) string
	// Shards, if set, remembers what the keys take from index shards
	// across runs (ShardMemo); the caller saves it.
	Shards *ShardMemo
	// Observe, if set, hears every key computed, with its named parts (a
	// run's record keeps them to tell why the next run's key differs).
	// Called from several goroutines.
	Observe func(a *action.Action, key digest.Digest, parts *Parts)
	// KeepMessages keeps each key's canonical Action and Command, as
	// encoded for the key, until Messages takes them: REAPI asks a client
	// that stores a result in the ActionCache to have put the Action and
	// Command that produced it in the CAS first.
	KeepMessages bool

	// The key of each action already asked for: the local cache and the
	// remote one both ask for every action's key, and the key (decoding
	// the shard) is most of the CPU thindist spends on an action. Its
	// fields above are set before the first action and not changed
	// after.
	mu   sync.Mutex
	memo map[*action.Action]memoKey
}

type memoKey struct {
	d   digest.Digest
	err error
	// msgs are the Action and Command by digest (KeepMessages), until
	// Messages takes them.
	msgs map[digest.Digest][]byte
}

// Parts are the named components of a key: what a changed key is explained
// by. Module names are as a user knows them (action.ModuleName).
type Parts struct {
	// Compiler is the compiler's identity (the content digest of its
	// executable, plus the remote compiler's name).
	Compiler string
	// Args is the command with each input and output named by its role
	// ("<module>", "<index>", "<import>", "<common>", "<out>"), so it
	// differs only when a flag does.
	Args []string
	// Env is NAME=value for each variable of KeyEnv that is set.
	Env []string
	// Platform is the remote platform properties, "name=value" joined by
	// commas.
	Platform string
	// Module is the name of the module compiled.
	Module string
	// Index is the digest of the normalised index shard: it changes with
	// the thin link's import and summary decisions.
	Index string
	// Order is the digest of the order in which the backend imports from
	// its modules ("" when it imports from fewer than two): it changes
	// when their paths come to sort differently.
	Order string
	// Inputs maps each module the backend may load (the module itself and
	// its imports), by name, to its content digest, or "absent".
	Inputs map[string]string
	// NotCached, when set, is why the action has no key (NotCached's
	// text); no other part is set then.
	NotCached string
}

// Key returns the canonical Action digest of a. An error means no safe key
// could be made (for example an unreadable shard), or a *NotCached: the
// action must then run uncached.
func (k *Keyer) Key(a *action.Action) (digest.Digest, error) {
	d, _, err := k.KeyShard(a)
	return d, err
}

// KeyShard is Key, and also returns the bytes of a's index shard that this
// call read to compute the key: nil when the key was already known (or
// could not be made). Building a's remote action from them
// (ExecOptions.Shard, executor.Job.Shard) saves reading the shard again, and sends
// the worker the very bytes the key was made from.
func (k *Keyer) KeyShard(a *action.Action) (digest.Digest, []byte, error) {
	k.mu.Lock()
	m, ok := k.memo[a]
	k.mu.Unlock()
	if ok {
		return m.d, nil, m.err
	}
	d, shard, msgs, err := k.key(a)
	k.mu.Lock()
	if k.memo == nil {
		k.memo = map[*action.Action]memoKey{}
	}
	k.memo[a] = memoKey{d: d, err: err, msgs: msgs}
	k.mu.Unlock()
	return d, shard, err
}

// Messages returns a's canonical Action and Command by digest, as encoded
// for its key (the Action's digest is the key), once: the Keyer keeps them
// only until then. ok is false without KeepMessages, before the key was
// made, or if it could not be.
func (k *Keyer) Messages(a *action.Action) (msgs map[digest.Digest][]byte, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m, ok := k.memo[a]
	if !ok || m.msgs == nil {
		return nil, false
	}
	k.memo[a] = memoKey{d: m.d, err: m.err}
	return m.msgs, true
}

func (k *Keyer) key(a *action.Action) (digest.Digest, []byte, map[digest.Digest][]byte, error) {
	if opt := SideFiles(a); opt != "" {
		err := &NotCached{Option: opt}
		if k.Observe != nil {
			k.Observe(a, digest.Digest{}, &Parts{NotCached: err.Error()})
		}
		return digest.Digest{}, nil, nil, err
	}
	var parts *Parts
	if k.Observe != nil {
		parts = &Parts{Inputs: map[string]string{}}
	}
	act, cmd, shard, err := k.canonical(a, parts)
	if err != nil {
		return digest.Digest{}, nil, nil, err
	}
	d, actBytes, err := digest.OfMessage(act)
	if err != nil {
		return d, nil, nil, err
	}
	if parts != nil {
		k.Observe(a, d, parts)
	}
	var msgs map[digest.Digest][]byte
	if k.KeepMessages {
		msgs = map[digest.Digest][]byte{d: actBytes, cmd.digest: cmd.bytes}
	}
	return d, shard, msgs, nil
}

// encoded is a message as encoded for a digest.
type encoded struct {
	digest digest.Digest
	bytes  []byte
}

// canonical builds a's canonical Action and Command, and fills parts when
// it is not nil; it returns the index shard it read too.
func (k *Keyer) canonical(a *action.Action, parts *Parts) (*repb.Action, encoded, []byte, error) {
	shardIdx, shard, table, norm, err := readIndexShard(a, k.Shards)
	if err != nil {
		return nil, encoded{}, nil, err
	}

	tree := NewTree()
	// The shard enters the key only through its normalised digest. Its raw
	// length must stay out: it carries the length of every PID-bearing
	// archive member path, so a relink by an lld whose PID has another
	// number of hex digits would miss. The tree holds a stand-in file
	// whose content is the normalised digest.
	tree.AddFile("index.thinlto.bc", digest.OfBytes(norm[:]), false)
	if parts != nil {
		parts.Index = digest.OfBytes(norm[:]).HexHash()
	}

	// Map each declared input to its canonical name.
	names := make([]string, len(a.Inputs))
	names[shardIdx] = "index.thinlto.bc"
	if err := k.addTableModules(tree, a, table, names, parts); err != nil {
		return nil, encoded{}, nil, err
	}
	if err := k.addOtherInputs(tree, a, names, parts); err != nil {
		return nil, encoded{}, nil, err
	}
	for _, arg := range a.Args {
		if arg.Kind == action.InputRef && names[arg.Index] == "" {
			return nil, encoded{}, nil, fmt.Errorf("argument names input %s, which has no canonical name", a.Inputs[arg.Index].Path)
		}
	}

	cmd := k.command(a, names)
	cmdDigest, cmdBytes, err := digest.OfMessage(cmd)
	if err != nil {
		return nil, encoded{}, nil, err
	}
	rootDigest, _, err := tree.Build()
	if err != nil {
		return nil, encoded{}, nil, err
	}
	id, err := k.CompilerID(a.Args[0].Text)
	if err != nil {
		return nil, encoded{}, nil, fmt.Errorf("identifying the compiler %s: %w", a.Args[0].Text, err)
	}
	if parts != nil {
		parts.fill(a, cmd, id)
	}
	return &repb.Action{
		CommandDigest:   cmdDigest.Proto(),
		InputRootDigest: rootDigest.Proto(),
		Platform:        k.Platform,
		Salt:            []byte(keyVersion + "\x00" + id),
	}, encoded{cmdDigest, cmdBytes}, shard, nil
}

// readIndexShard reads a's index shard: its input's index, its bytes, its
// module table and its normalised digest (from memo, if it has the shard).
func readIndexShard(a *action.Action, memo *ShardMemo) (idx int, shard []byte, table []bitcode.Module, norm [32]byte, err error) {
	idx = -1
	for i, in := range a.Inputs {
		if in.Role == action.RoleIndex {
			idx = i
			break
		}
	}
	if idx < 0 {
		return idx, nil, nil, norm, fmt.Errorf("no index shard among the inputs")
	}
	shard, err = plainfile.ReadFile(a.Abs(a.Inputs[idx].Local()))
	if err != nil {
		return idx, nil, nil, norm, fmt.Errorf("reading the index shard: %w", err)
	}
	table, norm, err = memo.tableAndDigest(shard)
	if err != nil {
		return idx, nil, nil, norm, fmt.Errorf("index shard %s: %w", a.Inputs[idx].Path, err)
	}
	return idx, shard, table, norm, nil
}

// addTableModules adds to tree every module of the shard's table, under
// its canonical name ("modules/h<hash>" when its content hash identifies
// it, else "modules/<slot>"; "<name>.absent" when it does not exist), and
// gives the declared inputs they are (by spelled or absolute path) that
// name in names unless they have one already.
func (k *Keyer) addTableModules(tree *Tree, a *action.Action, table []bitcode.Module, names []string, parts *Parts) error {
	byPath := map[string]int{} // spelled path and absolute path -> input
	for i, in := range a.Inputs {
		byPath[in.Path] = i
		byPath[a.Abs(in.Path)] = i
	}
	hashes := map[[5]uint32]int{}
	for _, m := range table {
		if m.HasHash() {
			hashes[m.Hash]++
		}
	}
	var sources []source // the modules it imports from: all but its own
	for slot, m := range table {
		// A module the table identifies by content is named by it, so
		// the name does not depend on the table's order (which follows
		// the paths: members copied out next to another output sort
		// elsewhere); others by their slot.
		name := "modules/" + strconv.Itoa(slot)
		if m.HasHash() && hashes[m.Hash] == 1 {
			name = fmt.Sprintf("modules/h%08x%08x%08x%08x%08x", m.Hash[0], m.Hash[1], m.Hash[2], m.Hash[3], m.Hash[4])
		}
		i, ok := byPath[m.Path]
		if !ok {
			i, ok = byPath[a.Abs(m.Path)]
		}
		local := a.Abs(m.Path) // the backend looks there
		if ok {
			local = a.Abs(a.Inputs[i].Local())
			if names[i] == "" {
				names[i] = name
			}
		}
		if !ok || a.Inputs[i].Role != action.RoleModule {
			sources = append(sources, source{m.Path, name})
		}
		d, err := k.Files.Get(local)
		if os.IsNotExist(err) {
			tree.AddFile(name+".absent", digest.Empty, false)
			if parts != nil {
				parts.Inputs[action.ModuleName(m.Path)] = "absent"
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("module %s: %w", m.Path, err)
		}
		if parts != nil {
			parts.Inputs[action.ModuleName(m.Path)] = d.HexHash()
		}
		if err := tree.AddFile(name, d, false); err != nil {
			return err
		}
	}
	return addImportOrder(tree, sources, parts)
}

// source is a module a backend imports from: its path in the shard and its
// canonical name.
type source struct{ path, name string }

// addImportOrder adds to tree, when the backend imports from two modules or
// more, a stand-in file "import-order" listing their canonical names in the
// order it imports from them: LLVM's importer takes the source modules in
// the byte order of their paths, and that order shows in the object (the
// order of its imported declarations, so of its symbols and sections). The
// names alone leave the order out, since they name modules by content;
// without this file, two links whose module paths sort differently would
// share a key for objects that differ.
func addImportOrder(tree *Tree, sources []source, parts *Parts) error {
	if len(sources) < 2 {
		return nil
	}
	slices.SortFunc(sources, func(x, y source) int { return strings.Compare(x.path, y.path) })
	var b strings.Builder
	for _, s := range sources {
		b.WriteString(s.name)
		b.WriteByte('\n')
	}
	d := digest.OfBytes([]byte(b.String()))
	if parts != nil {
		parts.Order = d.HexHash()
	}
	return tree.AddFile("import-order", d, false)
}

// addOtherInputs adds to tree, and names, the declared inputs the shard's
// table did not name: a module as "unlisted-module", anything else but an
// import (which cannot affect the object) as "common/<index>".
func (k *Keyer) addOtherInputs(tree *Tree, a *action.Action, names []string, parts *Parts) error {
	for i, in := range a.Inputs {
		if names[i] != "" {
			continue
		}
		switch in.Role {
		case action.RoleModule:
			// Not in the shard's table: clang compiles it as a foreign
			// module (an object without its code). Keyed as such.
			names[i] = "unlisted-module"
		case action.RoleImport:
			// An import the table does not name cannot affect the object.
			continue
		default:
			names[i] = "common/" + strconv.Itoa(i)
		}
		d, err := k.Files.Get(a.Abs(in.Local()))
		if err != nil {
			return fmt.Errorf("%s %s: %w", in.Role, in.Path, err)
		}
		if parts != nil {
			parts.Inputs[action.ModuleName(in.Path)] = d.HexHash()
		}
		if err := tree.AddFile(names[i], d, false); err != nil {
			return err
		}
	}
	return nil
}

// command is a's canonical Command: its arguments with the inputs by their
// canonical names, the outputs as "out/<index>", the compiler by its base
// name as clang reads it (driverName), and the KeyEnv variables that are
// set, sorted by name.
func (k *Keyer) command(a *action.Action, names []string) *repb.Command {
	outs := make([]string, len(a.Outputs))
	for i := range outs {
		outs[i] = "out/" + strconv.Itoa(i)
	}
	ka := keyed(a)
	argv := ka.Argv(func(i int) string { return names[i] }, func(i int) string { return outs[i] })
	argv[0] = driverName(argv[0])

	cmd := &repb.Command{Arguments: argv, OutputPaths: outs, Platform: k.Platform}
	for _, name := range KeyEnv {
		if v := k.getenv(name); v != "" {
			cmd.EnvironmentVariables = append(cmd.EnvironmentVariables, &repb.Command_EnvironmentVariable{Name: name, Value: v})
		}
	}
	sort.Slice(cmd.EnvironmentVariables, func(i, j int) bool {
		return cmd.EnvironmentVariables[i].Name < cmd.EnvironmentVariables[j].Name
	})
	return cmd
}

func (k *Keyer) getenv(name string) string {
	if k.Getenv == nil {
		return ""
	}
	return k.Getenv(name)
}

// Describe renders the key's ingredients for `--explain`-style debugging.
func (k *Keyer) Describe(a *action.Action) (string, error) {
	act, enc, _, err := k.canonical(a, nil)
	if err != nil {
		return "", err
	}
	var cmd repb.Command
	if err := proto.Unmarshal(enc.bytes, &cmd); err != nil {
		return "", err
	}
	return fmt.Sprintf("arguments: %s\nsalt: %q\ninput root: %s", strings.Join(cmd.Arguments, " "),
		act.Salt, act.InputRootDigest.Hash), nil
}

// fill sets the parts that canonical computes last: the compiler, the
// command with its paths named by role, the environment and the platform.
func (p *Parts) fill(a *action.Action, cmd *repb.Command, compiler string) {
	p.Compiler = compiler
	p.Args = keyed(a).Argv(func(i int) string { return "<" + roleTag(a.Inputs[i].Role) + ">" },
		func(int) string { return "<out>" })
	p.Args[0] = driverName(p.Args[0])
	for _, in := range a.Inputs {
		if in.Role == action.RoleModule {
			p.Module = action.ModuleName(in.Path)
		}
	}
	for _, e := range cmd.EnvironmentVariables {
		p.Env = append(p.Env, e.Name+"="+e.Value)
	}
	var props []string
	for _, pp := range cmd.GetPlatform().GetProperties() {
		props = append(props, pp.Name+"="+pp.Value)
	}
	p.Platform = strings.Join(props, ",")
}

func roleTag(r action.Role) string {
	switch r {
	case action.RoleModule:
		return "module"
	case action.RoleIndex:
		return "index"
	case action.RoleImport:
		return "import"
	case action.RoleCommon:
		return "common"
	}
	return "input"
}

// keyed returns a, or a copy of it whose arguments leave out a "-x ir"
// that changes nothing: one before the module argument, when the module's
// name has an extension clang types as an object or as bitcode (with
// -fthinlto-index, clang compiles such an input as IR, measured with clang
// 19 and 22). Before a source-named module ("m.c") it does change what
// clang does (without it clang refuses the input), so it stays.
func keyed(a *action.Action) *action.Action {
	for i := 0; i+2 < len(a.Args); i++ {
		x, ir, in := a.Args[i], a.Args[i+1], a.Args[i+2]
		if x.Kind != action.Literal || x.Text != "-x" || ir.Kind != action.Literal || ir.Text != "ir" ||
			in.Kind != action.InputRef || in.Text != "" || a.Inputs[in.Index].Role != action.RoleModule {
			continue
		}
		if !readAsIR[strings.ToLower(filepath.Ext(a.Inputs[in.Index].Path))] {
			return a
		}
		c := *a
		c.Args = append(slices.Clone(a.Args[:i]), a.Args[i+2:]...)
		return &c
	}
	return a
}

// readAsIR are the module name extensions clang reads as bitcode, given
// -fthinlto-index, without "-x ir": objects, libtool objects, bitcode,
// and lld's copies of archive members ("lib.a(m.o at 88).2.9A6.o").
var readAsIR = map[string]bool{".o": true, ".obj": true, ".lo": true, ".bc": true}
