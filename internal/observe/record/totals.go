package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/sys/lockfile"
)

// Totals are counters over every recorded run since they were last zeroed,
// kept in <records>/totals.json (records themselves are dropped with age;
// the totals are not).
type Totals struct {
	Since   time.Time `json:"since"`
	Runs    int64     `json:"runs"`
	Actions int64     `json:"actions"`
	// Remote cache: hits, and misses (actions it did not serve while in
	// use), for runs with --remote. The local cache's are its own
	// counters (cache.Stats), which count every run that used it,
	// recorded or not, and every action it missed, failed or not: one
	// count, which `thindist stats` and `thindist cache stats` both show.
	RemoteHits   int64 `json:"remote_hits"`
	RemoteMisses int64 `json:"remote_misses"`
	// SavedCPU is the compile time (µs) the hits saved.
	SavedCPU int64 `json:"saved_cpu_us"`
	// Compiled remotely, locally, raced (both at once), and how many of
	// the local ones had been meant for the remote service (fell back).
	Remote   int64 `json:"remote"`
	Local    int64 `json:"local"`
	Raced    int64 `json:"raced"`
	FellBack int64 `json:"fell_back"`
	Failed   int64 `json:"failed"`
	// CPU is the compile time (µs) of the actions compiled.
	CPU       int64 `json:"cpu_us"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
	// CacheLimit is the local cache's size limit that the last run used.
	CacheLimit int64 `json:"cache_limit,omitempty"`
}

// Add counts run in t.
func (t *Totals) Add(run *Run) {
	t.Runs++
	if t.Since.IsZero() {
		t.Since = run.Start
	}
	if run.LocalCache && run.CacheLimit > 0 {
		t.CacheLimit = run.CacheLimit
	}
	t.BytesUp += run.BytesUp
	t.BytesDown += run.BytesDown
	t.FellBack += run.FellBack
	for i := range run.Actions {
		a := &run.Actions[i]
		t.Actions++
		switch a.Where {
		case WhereLocalCache:
			t.SavedCPU += a.CPU
			continue
		case WhereRemoteCache:
			t.RemoteHits++
			t.SavedCPU += a.CPU
		case WhereRemote:
			t.Remote++
			t.CPU += a.CPU
		case WhereLocal:
			t.Local++
			t.CPU += a.CPU
		case WhereFailed:
			t.Failed++
			continue
		default:
			continue
		}
		if a.Raced {
			t.Raced++
		}
		if run.Remote != "" && a.Where != WhereRemoteCache {
			t.RemoteMisses++
		}
	}
}

func (s *Store) totalsPath() string { return filepath.Join(s.Dir, "totals.json") }
func (s *Store) lockPath() string   { return filepath.Join(s.Dir, "lock") }

// Keep writes run's record (Write) and counts it in the totals, both or
// neither: on a full disk, a record kept is a run counted. The totals are
// written first, under a temporary name, and take their place only once
// the record has; a record the totals could not then take in is removed.
func (s *Store) Keep(run *Run) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("record directory: %w", err)
	}
	wrote := false
	err := lockfile.With(s.lockPath(), func() error {
		t, err := s.readTotals()
		if err != nil {
			t = Totals{} // a damaged file restarts the counters
		}
		t.Add(run)
		return atomicfile.Write(s.totalsPath(), 0o644, func(w io.Writer) error {
			if err := json.NewEncoder(w).Encode(t); err != nil {
				return fmt.Errorf("the runs' totals: %w", err)
			}
			if err := s.Write(run); err != nil {
				return err
			}
			wrote = true
			return nil
		})
	})
	if err != nil && wrote {
		os.Remove(s.path(run))
		err = fmt.Errorf("the runs' totals: %w", err)
	}
	return err
}

// AddTotals counts run in the stored totals.
func (s *Store) AddTotals(run *Run) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	return lockfile.With(s.lockPath(), func() error {
		t, err := s.readTotals()
		if err != nil {
			t = Totals{} // a damaged file restarts the counters
		}
		t.Add(run)
		return s.writeTotals(t)
	})
}

// Totals returns the stored totals.
func (s *Store) Totals() (Totals, error) { return s.readTotals() }

// ZeroTotals resets the totals; records are kept.
func (s *Store) ZeroTotals(now time.Time) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	return lockfile.With(s.lockPath(), func() error {
		t, _ := s.readTotals()
		return s.writeTotals(Totals{Since: now, CacheLimit: t.CacheLimit})
	})
}

func (s *Store) readTotals() (Totals, error) {
	var t Totals
	data, err := os.ReadFile(s.totalsPath())
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	err = json.Unmarshal(data, &t)
	return t, err
}

func (s *Store) writeTotals(t Totals) error {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.totalsPath(), data, 0o644)
}
