package pipeline

import (
	"bytes"
	"context"
	"flag"
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
	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the chains in docs/architecture.md from what buildChain builds")

// architectureDoc is the page that shows the chain of each mode.
const architectureDoc = "../../docs/architecture.md"

// chainModes are the modes whose chains docs/architecture.md shows, each
// as the flags that select it.
var chainModes = []struct{ name, flags string }{
	{"local", ""},
	{"cache-only", "--remote=grpc://ADDR --remote-cache-only"},
	{"remote", "--remote=grpc://ADDR --no-race"},
	{"hybrid", "--remote=grpc://ADDR"},
	{"grouped", "--remote=grpc://ADDR --remote-group=8"},
}

// TestChainDoc: the executor chain buildChain composes for each mode is
// the one docs/architecture.md shows under that mode's marker, as
// executor.Describe prints it. With -update-doc it rewrites the page's
// chains instead.
func TestChainDoc(t *testing.T) {
	_, addr := reapitest.StartT(t, reapitest.Options{})
	// Actions no cache holds, so that every mode connects to the service.
	actions := testprog.Actions(t, testprog.Options{Modules: 2, Seed: 1})
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range chainModes {
		got := buildForDoc(t, strings.ReplaceAll(m.flags, "ADDR", addr), actions)
		block := regexp.MustCompile("(?s)(<!-- chain: " + regexp.QuoteMeta(m.name) + " -->\n```text\n)(.*?)(```\n)")
		sub := block.FindSubmatch(doc)
		switch {
		case sub == nil:
			t.Errorf("%s has no chain for mode %s (a <!-- chain: %s --> marker before a ```text block)", architectureDoc, m.name, m.name)
		case *updateDoc:
			doc = block.ReplaceAllLiteral(doc, append(append(append([]byte{}, sub[1]...), got...), sub[3]...))
		case string(sub[2]) != got:
			t.Errorf("mode %s (%s): the page shows\n%s\nbuildChain builds\n%s\n(go test ./internal/pipeline -run TestChainDoc -update-doc rewrites the page)", m.name, m.flags, sub[2], got)
		}
	}
	if *updateDoc {
		if err := os.WriteFile(architectureDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buildForDoc builds the chain of a run of actions with these flags (and
// a private cache directory, one local job) and describes it.
func buildForDoc(t *testing.T, flags string, actions []*action.Action) string {
	t.Helper()
	var cfg config.Config
	fs := config.NewFlagSet("thindist")
	cfg.Register(fs)
	args := append(strings.Fields(flags), "--jobs=1", "--cache-dir="+t.TempDir())
	if err := fs.Parse(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
	console := report.NewConsole(&stderr, false)
	warn := func(format string, args ...any) { t.Logf(format, args...) }
	ch, err := buildChain(context.Background(), &cfg, env, console, warn, report.NewTimeline(time.Now(), nil), actions, digest.NewFiles())
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
