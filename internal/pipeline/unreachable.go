package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/atomicfile"
)

// unreachableFor is how long links skip a remote service after one found
// it unreachable: long enough that a laptop off its VPN does not pay a
// dial on every relink, short enough that a service back up is used again
// within a minute or two.
const unreachableFor = 90 * time.Second

// unreachableFile, in the cache directory, names the service a link
// found unreachable and until when later links skip it.
const unreachableFile = "remote-unreachable.json"

type unreachableMark struct {
	Target string    `json:"target"`
	Until  time.Time `json:"until"`
}

// skipRemote returns, if a recent link in cache directory dir found
// target unreachable, the error that says so: the link compiles locally
// without trying it. Nil otherwise.
func skipRemote(dir, target string, now time.Time) error {
	path := filepath.Join(dir, unreachableFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var m unreachableMark
	if json.Unmarshal(data, &m) != nil || m.Target != target || !now.Before(m.Until) {
		return nil
	}
	return fmt.Errorf("remote %s could not be reached by a link %s ago; not trying it again until %s (remove %s to try now)",
		target, unreachableFor-m.Until.Sub(now).Round(time.Second), m.Until.Format("15:04:05"), path)
}

// markUnreachable records in dir that target cannot be reached, for
// unreachableFor from now. A mark that cannot be written costs only the
// next link's dial.
func markUnreachable(dir, target string, now time.Time) {
	data, err := json.Marshal(unreachableMark{Target: target, Until: now.Add(unreachableFor)})
	if err != nil || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	atomicfile.WriteFile(filepath.Join(dir, unreachableFile), data, 0o644)
}

// clearUnreachable removes dir's mark that target is unreachable, if
// there is one: a link reached it.
func clearUnreachable(dir, target string) {
	path := filepath.Join(dir, unreachableFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var m unreachableMark
	if json.Unmarshal(data, &m) != nil || m.Target == target {
		os.Remove(path)
	}
}
