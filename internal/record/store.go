package record

import (
	"bufio"
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

	"github.com/thindist/thindist/internal/atomicfile"
	"github.com/thindist/thindist/internal/redact"
)

// Default bounds of a Store.
const (
	DefaultMaxRuns  = 100
	DefaultMaxBytes = 64 << 20
)

// Store is the directory of records: <cache dir>/records/<ID>.json, where
// an ID sorts by time ("20261123-201946.123-4242").
type Store struct {
	Dir string
	// MaxRuns and MaxBytes bound the records kept; the oldest go first.
	MaxRuns  int
	MaxBytes int64
	// Secrets are the credentials of the run being written, left out of
	// its record wherever they occur (besides what redact finds by
	// syntax).
	Secrets redact.Values
}

// Open returns the store under cacheDir with the default bounds.
func Open(cacheDir string) *Store {
	return &Store{Dir: filepath.Join(cacheDir, "records"), MaxRuns: DefaultMaxRuns, MaxBytes: DefaultMaxBytes}
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
	err := atomicfile.Write(s.path(run.ID), 0o600, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(withTimes)
	})
	if err != nil {
		return fmt.Errorf("record %s: %w", run.ID, err)
	}
	return s.prune(run.ID)
}

func (s *Store) path(id string) string { return filepath.Join(s.Dir, id+".json") }

// Entry is a kept record, as listed.
type Entry struct {
	ID   string
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
	var total int64
	for _, e := range es {
		total += e.Size
	}
	for i := 0; i < len(es) && (len(es)-i > s.MaxRuns || total > s.MaxBytes); i++ {
		if es[i].ID == keep {
			continue
		}
		if err := os.Remove(es[i].Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		total -= es[i].Size
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
	d, _, err := recordHead(path, "")
	return d, err
}

// recordHead reads a record's working directory and, if that is want, the
// compile times that follow it (Run.Times), and no further: nil times for
// a record written before records kept them.
func recordHead(path, want string) (dir string, times map[string]int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 4096))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", nil, fmt.Errorf("record %s: not a JSON object", path)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", nil, fmt.Errorf("record %s: %w", path, err)
		}
		switch t {
		case "dir":
			if err := dec.Decode(&dir); err != nil {
				return "", nil, fmt.Errorf("record %s: %w", path, err)
			}
			if dir != want || want == "" {
				return dir, nil, nil
			}
			continue
		case "times":
			if err := dec.Decode(&times); err != nil {
				return "", nil, fmt.Errorf("record %s: %w", path, err)
			}
			return dir, times, nil
		case "actions":
			return dir, nil, nil // past the head: no times
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", nil, fmt.Errorf("record %s: %w", path, err)
		}
	}
	return dir, nil, nil
}
