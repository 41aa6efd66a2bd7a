package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestForkServerOnlyWhenItPays: a link with no more actions than local slots
// (Kbuild's final vmlinux links have one) execs its compilers instead of
// starting a fork server, which would cost more than it saves; a link with
// more forks them.
func TestForkServerOnlyWhenItPays(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 5})
	for _, tc := range []struct {
		jobs int
		by   proc.RunBy
	}{{jobs: len(actions), by: proc.ByExec}, {jobs: len(actions) - 1, by: proc.ByForkServer}} {
		t.Run(fmt.Sprintf("jobs=%d", tc.jobs), func(t *testing.T) {
			r := runRecorded(t, &config.Config{Jobs: tc.jobs, Progress: "never", NoCache: true, CacheDir: t.TempDir()}, actions)
			if len(r.Actions) != len(actions) {
				t.Fatalf("%d actions recorded, want %d", len(r.Actions), len(actions))
			}
			for _, a := range r.Actions {
				if a.By() != tc.by {
					t.Errorf("%d actions, --jobs=%d: %s run by %v, want %v", len(actions), tc.jobs, a.Module, a.By(), tc.by)
				}
			}
		})
	}
}

// runRecorded runs actions as cfg says and returns the run's record.
func runRecorded(t *testing.T, cfg *config.Config, actions []*action.Action) *record.Run {
	t.Helper()
	var stderr bytes.Buffer
	rec := record.New(record.Run{Dir: actions[0].Dir})
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }, Record: rec}
	if err := RunWith(context.Background(), cfg, env, actions, Options{}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	return rec.Finish(time.Now(), nil)
}
