package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// unreachableFor is how long links skip a remote service after one found
// it unreachable: long enough that a laptop off its VPN does not pay a
// dial on every relink, short enough that a service back up is used again
// within a minute or two.
const unreachableFor = 90 * time.Second

// notesFile, in the cache directory, is what links noted of the remote
// services for the links after them (remoteNotes).
const notesFile = "remote-notes.json"

// remoteNotes are a cache directory's notes of the remote services: the
// service a link found unreachable and until when later links skip it;
// each service's throughput as links measured it (remote.Measured, for
// --remote-compress=auto), and this machine's zstd speed. A note that
// cannot be read or written costs only what it would have saved (a dial,
// a link's first measurements); of two links writing at once, one's
// notes may be lost.
type remoteNotes struct {
	Unreachable *unreachableMark           `json:"unreachable,omitempty"`
	Links       map[string]remote.Measured `json:"links,omitempty"` // by target, Zstd nil
	Zstd        *remote.ZstdSpeed          `json:"zstd,omitempty"`
}

type unreachableMark struct {
	Target string    `json:"target"`
	Until  time.Time `json:"until"`
}

// readNotes reads dir's notes; none if there are none or they cannot be
// read.
func readNotes(dir string) remoteNotes {
	var n remoteNotes
	if data, err := os.ReadFile(filepath.Join(dir, notesFile)); err == nil && json.Unmarshal(data, &n) != nil {
		n = remoteNotes{}
	}
	return n
}

// updateNotes changes dir's notes with change.
func updateNotes(dir string, change func(*remoteNotes)) {
	n := readNotes(dir)
	change(&n)
	data, err := json.Marshal(n)
	if err != nil || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	atomicfile.WriteFile(filepath.Join(dir, notesFile), data, 0o644)
}

// skipRemote returns, if a recent link in cache directory dir found
// target unreachable, the error that says so: the link compiles locally
// without trying it. Nil otherwise.
func skipRemote(dir, target string, now time.Time) error {
	m := readNotes(dir).Unreachable
	if m == nil || m.Target != target || !now.Before(m.Until) {
		return nil
	}
	return fmt.Errorf("remote %s could not be reached by a link %s ago; not trying it again until %s (remove %s to try now)",
		target, unreachableFor-m.Until.Sub(now).Round(time.Second), m.Until.Format("15:04:05"), filepath.Join(dir, notesFile))
}

// markUnreachable records in dir that target cannot be reached, for
// unreachableFor from now.
func markUnreachable(dir, target string, now time.Time) {
	updateNotes(dir, func(n *remoteNotes) { n.Unreachable = &unreachableMark{Target: target, Until: now.Add(unreachableFor)} })
}

// clearUnreachable removes dir's mark that target is unreachable, if
// there is one: a link reached it.
func clearUnreachable(dir, target string) {
	if m := readNotes(dir).Unreachable; m == nil || m.Target != target {
		return
	}
	updateNotes(dir, func(n *remoteNotes) {
		if n.Unreachable != nil && n.Unreachable.Target == target {
			n.Unreachable = nil
		}
	})
}

// recallLink is what earlier links in dir measured of target's link, and
// of this machine's zstd (remote.Client.Recall).
func recallLink(dir, target string) remote.Measured {
	n := readNotes(dir)
	m := n.Links[target]
	m.Zstd = n.Zstd
	return m
}

// rememberLink notes in dir what a link measured of target's link
// (remote.Client.Measured), for the links after it.
func rememberLink(dir, target string, m remote.Measured) {
	if m.Up == (remote.Rate{}) && m.Down == (remote.Rate{}) && m.Zstd == nil {
		return
	}
	updateNotes(dir, func(n *remoteNotes) {
		if m.Zstd != nil {
			n.Zstd = m.Zstd
		}
		m.Zstd = nil
		if n.Links == nil {
			n.Links = map[string]remote.Measured{}
		}
		n.Links[target] = m
	})
}
