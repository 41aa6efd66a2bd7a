package remote

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// UnreachableFor is how long links skip a remote service after one found
// it unreachable: long enough that a laptop off its VPN does not pay a
// dial on every relink, short enough that a service back up is used again
// within a minute or two.
const UnreachableFor = 90 * time.Second

// NotesFile, in the cache directory, is what links noted of the remote
// services for the links after them (Notes).
const NotesFile = "remote-notes.json"

// Notes are a cache directory's notes of the remote services: the service
// a link found unreachable and until when later links skip it; each
// service's throughput as links measured it (Measured, for
// --remote-compress=auto), and this machine's zstd speed. A note that
// cannot be read or written costs only what it would have saved (a dial,
// a link's first measurements); of two links writing at once, one's notes
// may be lost.
type Notes struct{ dir string }

// NotesIn returns the notes kept in cache directory dir.
func NotesIn(dir string) Notes { return Notes{dir: dir} }

// notes is the file's content.
type notes struct {
	Unreachable *unreachableMark    `json:"unreachable,omitempty"`
	Links       map[string]Measured `json:"links,omitempty"` // by target, Zstd nil
	Zstd        *ZstdSpeed          `json:"zstd,omitempty"`
}

type unreachableMark struct {
	Target string    `json:"target"`
	Until  time.Time `json:"until"`
}

// read reads the notes; none if there are none or they cannot be read.
func (n Notes) read() notes {
	var c notes
	if data, err := os.ReadFile(filepath.Join(n.dir, NotesFile)); err == nil && json.Unmarshal(data, &c) != nil {
		c = notes{}
	}
	return c
}

// update changes the notes with change.
func (n Notes) update(change func(*notes)) {
	c := n.read()
	change(&c)
	data, err := json.Marshal(c)
	if err != nil || os.MkdirAll(n.dir, 0o755) != nil {
		return
	}
	atomicfile.WriteFile(filepath.Join(n.dir, NotesFile), data, 0o644)
}

// Unreachable returns, if a recent link found target unreachable (within
// UnreachableFor before now), the error that says so: the link compiles
// locally without trying it. Nil otherwise.
func (n Notes) Unreachable(target string, now time.Time) error {
	m := n.read().Unreachable
	if m == nil || m.Target != target || !now.Before(m.Until) {
		return nil
	}
	return fmt.Errorf("remote %s could not be reached by a link %s ago; not trying it again until %s (remove %s to try now)",
		target, UnreachableFor-m.Until.Sub(now).Round(time.Second), m.Until.Format("15:04:05"), filepath.Join(n.dir, NotesFile))
}

// MarkUnreachable notes that target cannot be reached, for UnreachableFor
// from now.
func (n Notes) MarkUnreachable(target string, now time.Time) {
	n.update(func(c *notes) { c.Unreachable = &unreachableMark{Target: target, Until: now.Add(UnreachableFor)} })
}

// ClearUnreachable removes the mark that target is unreachable, if there
// is one: a link reached it.
func (n Notes) ClearUnreachable(target string) {
	if m := n.read().Unreachable; m == nil || m.Target != target {
		return
	}
	n.update(func(c *notes) {
		if c.Unreachable != nil && c.Unreachable.Target == target {
			c.Unreachable = nil
		}
	})
}

// Recall is what earlier links measured of target's link, and of this
// machine's zstd (Client.Recall).
func (n Notes) Recall(target string) Measured {
	c := n.read()
	m := c.Links[target]
	m.Zstd = c.Zstd
	return m
}

// Remember notes what a link measured of target's link
// (Client.Measured), for the links after it.
func (n Notes) Remember(target string, m Measured) {
	if m.Up == (Rate{}) && m.Down == (Rate{}) && m.Zstd == nil {
		return
	}
	n.update(func(c *notes) {
		if m.Zstd != nil {
			c.Zstd = m.Zstd
		}
		m.Zstd = nil
		if c.Links == nil {
			c.Links = map[string]Measured{}
		}
		c.Links[target] = m
	})
}
