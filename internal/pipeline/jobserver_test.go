package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/sched/dispatch"
	"github.com/thindist/thindist/internal/sched/slots"
	"github.com/thindist/thindist/internal/sys/jobserver"
)

// brokenJobserver fails every Acquire as a jobserver at EOF does.
type brokenJobserver struct{}

func (brokenJobserver) Acquire(context.Context) (func(), error) {
	return nil, fmt.Errorf("%w (reading a token: EOF)", jobserver.ErrBroken)
}

// TestJobserverBreaks: a jobserver that stops working during the run is
// warned about once and the run goes on with --jobs alone; no slot fails.
func TestJobserverBreaks(t *testing.T) {
	var warnings []string
	pool := slots.NewPool(2)
	l := dispatch.Processes{Slots: pool, Tokens: tokens(brokenJobserver{}, 2, func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) })}
	var rels []func()
	for i := 0; i < 2; i++ {
		rel, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		rels = append(rels, rel)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "using --jobs=2") {
		t.Errorf("warnings %q; want one that says the run uses --jobs=2", warnings)
	}
	// --jobs still bounds the run.
	if n := pool.Free(); n != 0 {
		t.Errorf("%d of 2 --jobs slots free with two taken", n)
	}
	for _, rel := range rels {
		rel()
	}
	if n := pool.Free(); n != 2 {
		t.Errorf("%d of 2 --jobs slots free after every release", n)
	}
}

// TestJobserverNotAvailable: a jobserver refused at start is one warning,
// naming --jobs, and the run goes on.
func TestJobserverNotAvailable(t *testing.T) {
	var warnings []string
	env := Env{Jobserver: jobserver.Inherit("-j2 --jobserver-auth=999,998")}
	cfg := &config.Config{Jobs: 3}
	p, done := localProcesses(cfg, env, func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) })
	defer done()
	if p.Tokens != nil || p.Slots.Free() != 3 {
		t.Errorf("process slots %+v; want --jobs alone (3 slots, no tokens)", p)
	}
	want := "make's jobserver is not available to this recipe (mark it with '+' to share make's job slots)"
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) || !strings.HasSuffix(warnings[0], "; using --jobs=3") {
		t.Errorf("warnings %q; want one %q ... using --jobs=3", warnings, want)
	}
}
