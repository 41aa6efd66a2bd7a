package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestShardMemoOfExecutable: a run of a thindist executable (Env.Self)
// keeps the shard memo in its cache directory, one with no executable of
// its own (the plugin) keeps none; and the memo's identity changes when
// the executable is replaced.
func TestShardMemoOfExecutable(t *testing.T) {
	actions := testprog.Actions(t, testprog.Options{Modules: 3, Seed: 4})
	self := filepath.Join(t.TempDir(), "thindist")
	if err := os.WriteFile(self, []byte("one build"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, withSelf := range []bool{false, true} {
		dir := t.TempDir()
		cfg := &config.Config{Jobs: 2, Progress: "never", NoForkServer: true, CacheDir: dir}
		var stderr bytes.Buffer
		env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }}
		if withSelf {
			env.Self = self
		}
		if err := RunWith(context.Background(), cfg, env, actions, Options{}); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		_, err := os.Stat(filepath.Join(dir, "shards"))
		if kept := err == nil; kept != withSelf {
			t.Errorf("with an executable %v: shard memo kept %v", withSelf, kept)
		}
	}
	id := selfIdentity(self)
	if id == "" || selfIdentity("") != "" {
		t.Fatalf("identities %q and %q", id, selfIdentity(""))
	}
	os.Remove(self) // as a build replaces it
	if err := os.WriteFile(self, []byte("another build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if selfIdentity(self) == id {
		t.Error("a replaced executable kept its identity")
	}
}
