package record

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/observe/redact"
	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// Default bounds of a Store.
const (
	DefaultMaxPerOutput = 100
	DefaultMaxRuns      = 2000
	DefaultMaxBytes     = 256 << 20
)

// Store is the directory of records: <cache dir>/records/<ID>_<key>.json,
// where an ID sorts by time ("20261123-201946.123-4242") and the key names
// what the run linked (OutputKey), so that the records of one output are
// counted without reading any. Records written before keys were kept are
// <ID>.json, of no output.
type Store struct {
	Dir string
	// MaxPerOutput bounds the records kept of one output (the oldest go
	// first); MaxRuns and MaxBytes the records kept in all, which, when
	// passed, drop the oldest record of the output with the most records
	// (MaxRuns) or bytes (MaxBytes): one busy build does not push out the
	// records of another.
	MaxPerOutput int
	MaxRuns      int
	MaxBytes     int64
	// Secrets are the credentials of the run being written, left out of
	// its record wherever they occur (besides what redact finds by
	// syntax).
	Secrets redact.Values
}

// Open returns the store under cacheDir with the default bounds.
func Open(cacheDir string) *Store {
	return &Store{Dir: filepath.Join(cacheDir, "records"), MaxPerOutput: DefaultMaxPerOutput,
		MaxRuns: DefaultMaxRuns, MaxBytes: DefaultMaxBytes}
}

// OutputKey names what run linked, for the records' file names: a digest
// of its output's absolute path, else of its working directory.
func OutputKey(run *Run) string {
	sum := sha256.Sum256([]byte(run.Where()))
	return hex.EncodeToString(sum[:6])
}

// Where is the absolute path of what the run linked: its output (relative
// to its working directory), else its working directory.
func (r *Run) Where() string {
	if r.Output == "" {
		return r.Dir
	}
	if filepath.IsAbs(r.Output) {
		return filepath.Clean(r.Output)
	}
	return filepath.Join(r.Dir, r.Output)
}

// NewID names a run that started at start in process pid.
func NewID(start time.Time, pid int) string {
	return fmt.Sprintf("%s-%d", start.UTC().Format("20060102-150405.000"), pid)
}

// Write saves run, whole or not at all, then drops the oldest records
// beyond the bounds (never run itself). Credentials are left out
// (Run.Redacted with s.Secrets), and records are readable by their owner
// only: they hold command lines, and the directory may be shared.
func (s *Store) Write(run *Run) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("record directory: %w", err)
	}
	// A directory made before records were private. In a cache directory
	// shared with other users the directory may be another's, and cannot
	// be changed: the record file itself is still its owner's alone.
	_ = os.Chmod(s.Dir, 0o700)
	// The times History orders by, at the record's head, so that it
	// reads no further (recordHead).
	withTimes := run.Redacted(s.Secrets)
	withTimes.Times = timesOf(run)
	// Encoded straight into the file: json.Marshal would return a copy of
	// its buffer, a large run's record held twice at the end of the run.
	err := atomicfile.Write(s.path(run), 0o600, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(withTimes)
	})
	if err != nil {
		return fmt.Errorf("record %s: %w", run.ID, err)
	}
	return s.prune(run.ID)
}

func (s *Store) path(run *Run) string {
	return filepath.Join(s.Dir, run.ID+"_"+OutputKey(run)+".json")
}

// Entry is a kept record, as listed.
type Entry struct {
	ID string
	// Key is what the run linked (OutputKey), "" for a record written
	// before records had keys.
	Key  string
	Path string
	Size int64
}

// List returns the kept records, oldest first.
func (s *Store) List() ([]Entry, error) { return s.list(true) }

// list is List, with each record's Size only if sized: that is a system
// call per record, which pruning needs and History, reading the newest
// few, does not.
func (s *Store) list(sized bool) ([]Entry, error) {
	des, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		// Records are named by time; temporary files of writers start
		// with a dot; totals.json is not a record.
		if name[0] < '0' || name[0] > '9' || !strings.HasSuffix(name, ".json") || !de.Type().IsRegular() {
			continue
		}
		e := Entry{ID: strings.TrimSuffix(name, ".json"), Path: filepath.Join(s.Dir, name)}
		if id, key, ok := strings.Cut(e.ID, "_"); ok {
			e.ID, e.Key = id, key
		}
		if sized {
			fi, err := de.Info()
			if err != nil {
				continue // removed meanwhile
			}
			e.Size = fi.Size()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// prune removes the oldest records beyond the bounds, and temporary files
// that writers which died left behind. Several links may prune at once: a
// record another removed first is simply gone.
func (s *Store) prune(keep string) error {
	es, err := s.List()
	if err != nil {
		return err
	}
	for _, e := range pruned(es, keep, s.MaxPerOutput, s.MaxRuns, s.MaxBytes) {
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	des, _ := os.ReadDir(s.Dir)
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			continue
		}
		if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(filepath.Join(s.Dir, de.Name()))
		}
	}
	return nil
}

// pruned returns the records of es (oldest first) to remove, never the
// one whose ID is keep: each output's oldest beyond perOutput, then, while
// more than maxRuns records or maxBytes remain, the oldest record of the
// output with the most records (or, for the bytes, the most bytes).
func pruned(es []Entry, keep string, perOutput, maxRuns int, maxBytes int64) []Entry {
	type group struct {
		es    []Entry // oldest first, those not yet removed
		bytes int64
	}
	groups := map[string]*group{}
	var keys []string // in the order of their oldest record: ties go to the older
	var count int
	var total int64
	for _, e := range es {
		g := groups[e.Key]
		if g == nil {
			g = &group{}
			groups[e.Key] = g
			keys = append(keys, e.Key)
		}
		g.es = append(g.es, e)
		g.bytes += e.Size
		count++
		total += e.Size
	}
	var out []Entry
	// drop removes g's oldest record but keep; false if g has no other.
	drop := func(g *group) bool {
		for i, e := range g.es {
			if e.ID == keep {
				continue
			}
			g.es = append(g.es[:i:i], g.es[i+1:]...)
			g.bytes -= e.Size
			count--
			total -= e.Size
			out = append(out, e)
			return true
		}
		return false
	}
	for _, k := range keys {
		g := groups[k]
		for perOutput > 0 && len(g.es) > perOutput && drop(g) {
		}
	}
	for count > maxRuns || total > maxBytes {
		var biggest *group
		for _, k := range keys {
			g := groups[k]
			if len(g.es) == 0 || len(g.es) == 1 && g.es[0].ID == keep {
				continue
			}
			if biggest == nil || count > maxRuns && len(g.es) > len(biggest.es) ||
				count <= maxRuns && g.bytes > biggest.bytes {
				biggest = g
			}
		}
		if biggest == nil || !drop(biggest) {
			break
		}
	}
	return out
}

// Load reads a record: "last" (or "") for the newest, "last~N" for the
// one N before it, an ID, or the path of a record file.
func (s *Store) Load(which string) (*Run, error) {
	if which == "" {
		which = "last"
	}
	if strings.ContainsRune(which, os.PathSeparator) || strings.HasSuffix(which, ".json") {
		return ReadFile(which)
	}
	es, err := s.List()
	if err != nil {
		return nil, err
	}
	if which == "last" || strings.HasPrefix(which, "last~") {
		back := 0
		if n := strings.TrimPrefix(which, "last"); n != "" {
			if _, err := fmt.Sscanf(n, "~%d", &back); err != nil || back < 0 {
				return nil, fmt.Errorf("%q: say last, last~N, a run's ID or a record file", which)
			}
		}
		if back >= len(es) {
			if len(es) == 0 {
				return nil, fmt.Errorf("no run is recorded in %s (records are kept unless --no-record)", s.Dir)
			}
			return nil, fmt.Errorf("%s: only %d runs are recorded", which, len(es))
		}
		return ReadFile(es[len(es)-1-back].Path)
	}
	var found []Entry
	for _, e := range es {
		if e.ID == which {
			return ReadFile(e.Path)
		}
		if strings.HasPrefix(e.ID, which) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no recorded run %q in %s ('thindist report --list' lists them)", which, s.Dir)
	case 1:
		return ReadFile(found[0].Path)
	}
	return nil, fmt.Errorf("%q names %d runs (%s, ...): give more of the ID", which, len(found), found[0].ID)
}

// LastUnder reads the newest record of a run that linked under dir: whose
// output (Run.Where), or, without one, whose working directory is dir or
// below it. found is false when no record is, and then run is the newest of
// all (nil, with an error, when there is none).
func (s *Store) LastUnder(dir string) (run *Run, found bool, err error) {
	es, err := s.list(false)
	if err != nil {
		return nil, false, err
	}
	dirs := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dirs[0] {
		dirs = append(dirs, real)
	}
	for i := len(es) - 1; i >= 0; i-- {
		h, err := recordHead(es[i].Path, "")
		if err != nil {
			continue // removed meanwhile, or unreadable: not this one
		}
		for _, d := range dirs {
			if under(h.where(), d) || under(h.dir, d) {
				run, err := ReadFile(es[i].Path)
				return run, err == nil, err
			}
		}
	}
	run, err = s.Load("last")
	return run, false, err
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ReadFile reads a record file, without credentials (Run.Redacted).
func ReadFile(path string) (*Run, error) {
	run, err := readFile(path)
	if err != nil {
		return nil, err
	}
	// Records written before credentials were left out may hold some:
	// whatever shows one (report, its JSON and HTML) sees it without.
	return run.Redacted(redact.Values{}), nil
}

// readFile reads a record file as it is, for the history, which shows
// nothing of its command lines.
func readFile(path string) (*Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("record %s: %w", path, err)
	}
	if run.Schema < 1 || run.Schema > Schema {
		return nil, fmt.Errorf("record %s has schema %d; this thindist reads schema 1 to %d", path, run.Schema, Schema)
	}
	return &run, nil
}

// recordDir reads a record only as far as its working directory, which
// the writer puts among the first fields, so that finding the records of
// one directory does not parse every action of every other.
func recordDir(path string) (string, error) {
	h, err := recordHead(path, "")
	return h.dir, err
}

// head is what recordHead reads of a record.
type head struct {
	dir, output string
	times       map[string]int64
}

// where is head's Run.Where.
func (h head) where() string { return (&Run{Dir: h.dir, Output: h.output}).Where() }

// recordHead reads a record's working directory, its output and, if the
// directory is want, the compile times that follow it (Run.Times), and no
// further: nil times for a record written before records kept them. With
// want "" it stops at the directory and output.
func recordHead(path, want string) (h head, err error) {
	f, err := os.Open(path)
	if err != nil {
		return head{}, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 4096))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return head{}, fmt.Errorf("record %s: not a JSON object", path)
	}
	var sawDir, sawOutput bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return head{}, fmt.Errorf("record %s: %w", path, err)
		}
		var into any
		switch t {
		case "dir":
			into, sawDir = &h.dir, true
		case "output":
			into, sawOutput = &h.output, true
		case "times":
			if want == "" {
				into = new(json.RawMessage) // not wanted: skipped
			} else {
				into = &h.times
			}
		case "actions":
			return h, nil // past the head
		default:
			into = new(json.RawMessage)
		}
		if err := dec.Decode(into); err != nil {
			return head{}, fmt.Errorf("record %s: %w", path, err)
		}
		switch {
		case want == "" && sawDir && sawOutput, want != "" && sawDir && h.dir != want, h.times != nil:
			return h, nil
		}
	}
	return h, nil
}
