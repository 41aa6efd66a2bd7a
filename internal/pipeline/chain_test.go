package pipeline

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/local/proc"
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the chains in docs/architecture.md from what buildChain and localRunner build")

// architectureDoc is the page that shows the chain of each mode.
const architectureDoc = "../../docs/architecture.md"

// chainModes are the modes whose chains docs/architecture.md shows, each
// as the flags that select it.
var chainModes = []struct{ name, flags string }{
	{"local", ""},
	{"cache-only", "--remote=grpc://ADDR --remote-cache-only"},
	{"remote", "--remote=grpc://ADDR --no-race"},
	{"hybrid", "--remote=grpc://ADDR"},
	{"grouped", "--remote=grpc://ADDR --remote-toolchain=installed --remote-group=8"},
}

// TestChainDoc: the executor chain buildChain composes for each mode is
// the one docs/architecture.md shows under that mode's marker, as
// executor.Describe prints it. With -update-doc it rewrites the page's
// chains instead.
func TestChainDoc(t *testing.T) {
	_, addr := reapitest.StartT(t, reapitest.Options{})
	// Actions no cache holds, so that every mode connects to the service.
	actions := testprog.Actions(t, testprog.Options{Modules: 2, Seed: 1})
	var shown []docBlock
	for _, m := range chainModes {
		got := buildForDoc(t, strings.ReplaceAll(m.flags, "ADDR", addr), actions)
		shown = append(shown, docBlock{m.name, m.flags, "buildChain builds", got})
	}
	checkDoc(t, "chain", shown)
}

// runnerModes are the modes whose runner chains docs/architecture.md
// shows: the flags that select each (WORKER is a thindist-worker's path)
// and the link's number of actions, for two local slots.
var runnerModes = []struct {
	name, flags string
	actions     int
}{
	{"exec", "--no-worker", 2},
	{"fork", "--no-worker", 8},
	{"workers", "--worker=WORKER --worker-idle=0", 8},
	{"server", "--worker=WORKER", 8},
	{"server, few actions", "--worker=WORKER", 2},
	{"server, no fork server", "--worker=WORKER --no-fork-server", 8},
}

// TestRunnerChainDoc: the runner chain localRunner composes for each mode
// is the one docs/architecture.md shows under that mode's marker
// (<!-- runner: ... -->), as proc.Describe prints it. With -update-doc it
// rewrites the page's runner chains instead.
func TestRunnerChainDoc(t *testing.T) {
	worker := filepath.Join(t.TempDir(), "thindist-worker")
	if err := os.WriteFile(worker, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	var shown []docBlock
	for _, m := range runnerModes {
		flags := strings.ReplaceAll(m.flags, "WORKER", worker)
		cfg := configForDoc(t, append(strings.Fields(flags), "--jobs=2", "--server-dir="+filepath.Join(t.TempDir(), "server")))
		env := Env{Getenv: func(string) string { return "" }, Self: "/usr/bin/thindist"}
		warn := func(format string, args ...any) { t.Errorf("mode %s: "+format, append([]any{m.name}, args...)...) }
		runner, closers := localRunner(cfg, env, t.TempDir(), os.Environ(), m.actions, report.NewTimeline(time.Now(), nil), warn)
		got := proc.Describe(runner)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		shown = append(shown, docBlock{m.name, fmt.Sprintf("%s, %d actions on 2 slots", m.flags, m.actions), "localRunner builds", got})
	}
	checkDoc(t, "runner", shown)
}

// docBlock is what the page should show under one marker.
type docBlock struct {
	name  string // the marker's: <!-- kind: name -->
	how   string // how the mode is selected, for a failure's message
	built string // what built got, for a failure's message
	got   string
}

// checkDoc checks that docs/architecture.md shows each block's got in the
// ```text block after its marker <!-- kind: name -->, or, with
// -update-doc, writes them there.
func checkDoc(t *testing.T, kind string, blocks []docBlock) {
	t.Helper()
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		block := regexp.MustCompile("(?s)(<!-- " + kind + ": " + regexp.QuoteMeta(b.name) + " -->\n```text\n)(.*?)(```\n)")
		sub := block.FindSubmatch(doc)
		switch {
		case sub == nil:
			t.Errorf("%s shows no %s for mode %s (a <!-- %s: %s --> marker before a ```text block)", architectureDoc, kind, b.name, kind, b.name)
		case *updateDoc:
			doc = block.ReplaceAllLiteral(doc, append(append(append([]byte{}, sub[1]...), b.got...), sub[3]...))
		case string(sub[2]) != b.got:
			t.Errorf("%s %s (%s): the page shows\n%s\n%s\n%s\n(go test ./internal/pipeline -run %s -update-doc rewrites the page)", kind, b.name, b.how, sub[2], b.built, b.got, t.Name())
		}
	}
	if *updateDoc {
		if err := os.WriteFile(architectureDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// configForDoc is the Config these command-line arguments set.
func configForDoc(t *testing.T, args []string) *config.Config {
	t.Helper()
	var cfg config.Config
	fs := config.NewFlagSet("thindist")
	cfg.Register(fs)
	if err := fs.Parse(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// buildForDoc builds the chain of a run of actions with these flags (and
// a private cache directory, one local job) and describes it.
func buildForDoc(t *testing.T, flags string, actions []*action.Action) string {
	t.Helper()
	cfg := configForDoc(t, append(strings.Fields(flags), "--jobs=1", "--cache-dir="+t.TempDir()))
	var stderr bytes.Buffer
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	console := report.NewConsole(&stderr, false)
	warn := func(format string, args ...any) { t.Logf(format, args...) }
	ch, err := buildChain(context.Background(), cfg, env, console, warn, report.NewTimeline(time.Now(), nil), actions, digest.NewFiles(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.close()
	return executor.Describe(ch.ex)
}

// TestArchitectureNamesEveryPackage: docs/architecture.md's table names
// every package of the module, so a newcomer finds each one's job there.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(architectureDoc))
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if goFiles, _ := filepath.Glob(filepath.Join(path, "*.go")); len(goFiles) == 0 || rel == "." {
			return nil
		}
		if !bytes.Contains(doc, []byte("| `"+filepath.ToSlash(rel)+"` |")) {
			t.Errorf("%s does not name package %s in its table", architectureDoc, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
