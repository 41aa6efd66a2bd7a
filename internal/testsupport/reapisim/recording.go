package reapisim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Recording is what a recording run kept: each action's result, the blobs
// it names (outputs, stdout, stderr) and the CPU time the action took (user
// and system, of the process and the children it waited for). Safe for
// concurrent use.
type Recording struct {
	mu      sync.Mutex
	actions map[string]*recordedAction
}

type recordedAction struct {
	Result *repb.ActionResult
	CPU    time.Duration
	blobs  [][]byte
	// Made by prepare: the blobs' digests, and their zstd forms for a
	// server that serves zstd.
	digests []*repb.Digest
	packed  [][]byte
}

// prepare digests every recorded blob, and compresses it for a server
// that serves zstd, ahead of the replay. A replayed execution then stores
// its outputs in the CAS as they are, and serving one compressed costs no
// more than on a real server that keeps blobs compressed: the simulation
// runs on the client's machine, and compressing every output at every read,
// or hashing and copying it at every execution, would take CPU from the
// client it measures.
func (r *Recording) prepare(zstd bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.actions {
		if a.digests == nil {
			a.digests = make([]*repb.Digest, len(a.blobs))
			for i, b := range a.blobs {
				a.digests[i] = reapitest.DigestOf(b)
			}
		}
		if zstd && a.packed == nil {
			a.packed = make([][]byte, len(a.blobs))
			for i, b := range a.blobs {
				a.packed[i] = reapitest.ZstdCompress(b)
			}
		}
	}
}

// NewRecording returns an empty recording.
func NewRecording() *Recording { return &Recording{actions: map[string]*recordedAction{}} }

// Len is the number of recorded actions.
func (r *Recording) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.actions)
}

// CPUTimes returns the recorded CPU time of every action, longest first.
func (r *Recording) CPUTimes() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d []time.Duration
	for _, a := range r.actions {
		d = append(d, a.CPU)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] > d[j] })
	return d
}

func (r *Recording) get(key string) (*recordedAction, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.actions[key]
	return a, ok
}

// longest is the key of the action with the longest CPU time ("" if none).
func (r *Recording) longest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, key := time.Duration(-1), ""
	for k, a := range r.actions {
		if a.CPU > best || (a.CPU == best && k < key) {
			best, key = a.CPU, k
		}
	}
	return key
}

// add records the action key's result, copying the blobs it names from
// the server's CAS; it reports false if one is missing (nothing recorded).
func (r *Recording) add(s *reapitest.FakeServer, key string, ar *repb.ActionResult, cpu time.Duration) bool {
	var blobs [][]byte
	for _, d := range resultDigests(ar) {
		b, ok := s.Blob(d)
		if !ok {
			return false
		}
		blobs = append(blobs, b)
	}
	ar = cloneResult(ar)
	ar.ExecutionMetadata = nil
	r.mu.Lock()
	r.actions[key] = &recordedAction{Result: ar, CPU: cpu, blobs: blobs}
	r.mu.Unlock()
	return true
}

// resultDigests are the blobs an ActionResult names.
func resultDigests(ar *repb.ActionResult) []*repb.Digest {
	var ds []*repb.Digest
	for _, f := range ar.GetOutputFiles() {
		ds = append(ds, f.GetDigest())
	}
	for _, d := range ar.GetOutputDirectories() {
		ds = append(ds, d.GetTreeDigest())
	}
	for _, d := range []*repb.Digest{ar.GetStdoutDigest(), ar.GetStderrDigest()} {
		if d != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// recordingFile is a Recording on disk (JSON).
type recordingFile struct {
	Actions []recordingEntry `json:"actions"`
}

type recordingEntry struct {
	Action string   `json:"action"` // the content key (contentKey)
	CPU    int64    `json:"cpu_ns"`
	Result []byte   `json:"result"` // a serialised ActionResult
	Blobs  [][]byte `json:"blobs"`  // the blobs it names, in resultDigests order
}

// Save writes the recording to path (atomically).
func (r *Recording) Save(path string) error {
	r.mu.Lock()
	var f recordingFile
	keys := make([]string, 0, len(r.actions))
	for k := range r.actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := r.actions[k]
		res, err := proto.MarshalOptions{Deterministic: true}.Marshal(a.Result)
		if err != nil {
			r.mu.Unlock()
			return fmt.Errorf("recording %s: action %s: %w", path, k, err)
		}
		f.Actions = append(f.Actions, recordingEntry{Action: k, CPU: int64(a.CPU), Result: res, Blobs: a.blobs})
	}
	r.mu.Unlock()
	data, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("recording %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("recording %s: %w", path, err)
	}
	return nil
}

// LoadRecording reads a recording that Save wrote.
func LoadRecording(path string) (*Recording, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	var f recordingFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	r := NewRecording()
	for _, e := range f.Actions {
		ar := &repb.ActionResult{}
		if err := proto.Unmarshal(e.Result, ar); err != nil {
			return nil, fmt.Errorf("recording %s: action %s: %w", path, e.Action, err)
		}
		ds := resultDigests(ar)
		if len(ds) != len(e.Blobs) {
			return nil, fmt.Errorf("recording %s: action %s names %d blobs, holds %d", path, e.Action, len(ds), len(e.Blobs))
		}
		for i, d := range ds {
			if reapitest.DigestKey(reapitest.DigestOf(e.Blobs[i])) != reapitest.DigestKey(d) {
				return nil, fmt.Errorf("recording %s: action %s: blob %d does not match its digest", path, e.Action, i)
			}
		}
		r.actions[e.Action] = &recordedAction{Result: ar, CPU: time.Duration(e.CPU), blobs: e.Blobs}
	}
	return r, nil
}

// RecordedAction is one action of a Recording, as a worker that replays it
// needs it.
type RecordedAction struct {
	Result *repb.ActionResult
	CPU    time.Duration
	// Blobs holds the blobs the result names, by digest ("hash/size").
	Blobs map[string][]byte
}

// Lookup returns the recorded action with content key key (ContentKey).
func (r *Recording) Lookup(key string) (RecordedAction, bool) {
	a, ok := r.get(key)
	if !ok {
		return RecordedAction{}, false
	}
	ra := RecordedAction{Result: cloneResult(a.Result), CPU: a.CPU, Blobs: map[string][]byte{}}
	for i, d := range resultDigests(a.Result) {
		ra.Blobs[reapitest.DigestKey(d)] = a.blobs[i]
	}
	return ra, true
}

// Split saves every action of r as a recording of its own, dir/<key>.json,
// so that a worker replaying one action reads only that action.
func (r *Recording) Split(dir string) error {
	r.mu.Lock()
	one := make(map[string]*Recording, len(r.actions))
	for k, a := range r.actions {
		one[k] = &Recording{actions: map[string]*recordedAction{k: a}}
	}
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	for k, rec := range one {
		if err := rec.Save(filepath.Join(dir, k+".json")); err != nil {
			return err
		}
	}
	return nil
}

// contentKey names what an action computes, for the recording
// (ContentKey), from its input tree in s's CAS.
func contentKey(s *reapitest.FakeServer, action *repb.Action, command *repb.Command) (string, error) {
	files := map[string]string{} // root-relative path → digest key
	if err := listFiles(s, "", action.GetInputRootDigest(), files); err != nil {
		return "", err
	}
	return ContentKey(action.GetSalt(), command.GetArguments(), command.GetWorkingDirectory(), files, command.GetOutputPaths()), nil
}

// ContentKey names what an action computes, for a Recording: its salt, its
// arguments with every input file they name replaced by the file's digest,
// and the digests of all its input files, but not the names of those files
// nor the ThinLTO index shard (-fthinlto-index=). lld names the files of a
// link (archive members it extracts, index shards) after its process id, so
// the same backend of two links has two action digests; its result does not
// depend on those names. (The shard differs only by the module paths it
// records.) files maps every input file's path, relative to the input root
// and slash-separated, to its digest as "hash/size"; workDir is the
// command's working directory inside the root. A worker that sees only the
// command and its input root on disk computes the same key (bench's replay
// worker, for a real cluster).
func ContentKey(salt []byte, args []string, workDir string, files map[string]string, outputs []string) string {
	const index = "-fthinlto-index="
	skip := ""
	h := sha256.New()
	fmt.Fprintf(h, "salt:%x\x00", salt)
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, index); ok {
			skip = path.Join(workDir, p)
			a = index
		} else if d, ok := files[path.Join(workDir, a)]; ok {
			a = "file:" + d
		}
		fmt.Fprintf(h, "%d:%s\x00", len(a), a)
	}
	var ds []string
	for p, d := range files {
		if p != skip {
			ds = append(ds, d)
		}
	}
	sort.Strings(ds)
	for _, d := range ds {
		fmt.Fprintf(h, "%s\x00", d)
	}
	for _, o := range outputs {
		fmt.Fprintf(h, "out:%s\x00", o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// listFiles adds the files of the input tree d in s's CAS, below dir, to
// files.
func listFiles(s *reapitest.FakeServer, dir string, d *repb.Digest, files map[string]string) error {
	data, ok := s.Blob(d)
	if !ok {
		return reapitest.MissingBlobsError([]*repb.Digest{d})
	}
	var node repb.Directory
	if err := proto.Unmarshal(data, &node); err != nil {
		return status.Errorf(codes.InvalidArgument, "blob %s is not a Directory: %v", reapitest.DigestKey(d), err)
	}
	for _, f := range node.GetFiles() {
		files[path.Join(dir, f.GetName())] = reapitest.DigestKey(f.GetDigest())
	}
	for _, sub := range node.GetDirectories() {
		if err := listFiles(s, path.Join(dir, sub.GetName()), sub.GetDigest(), files); err != nil {
			return err
		}
	}
	return nil
}
