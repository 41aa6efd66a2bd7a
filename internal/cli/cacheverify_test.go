package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/sys/digest"
)

// TestCacheVerify: `thindist cache verify` names a corrupt blob and exits
// 1; --fix removes it and exits 0, since none remains; then the cache verifies
// clean with exit 0.
func TestCacheVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	disk, err := cache.OpenDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("some blob")
	d := digest.OfBytes(content)
	if err := disk.WriteBlobBytes(t.Context(), nil, d, content); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "cas", d.HexHash()[:2], d.HexHash())
	if err := os.WriteFile(bad, []byte("some blob, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": t.TempDir()}
	code, out, _ := runCLI(t, env, "cache", "verify", "--cache-dir", dir)
	if code != 1 || !strings.Contains(out, "corrupt: "+bad) || !strings.Contains(out, "--fix") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("verify without --fix removed the blob: %v", err)
	}
	code, out, _ = runCLI(t, env, "cache", "verify", "--fix", "--cache-dir", dir)
	if code != 0 || !strings.Contains(out, "removed: "+bad) || !strings.Contains(out, "1 corrupt, 1 removed") {
		t.Errorf("verify --fix: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("verify --fix kept the corrupt blob")
	}
	code, out, _ = runCLI(t, env, "cache", "verify", "--cache-dir", dir)
	if code != 0 || !strings.Contains(out, ": 0 corrupt") {
		t.Errorf("verify after --fix: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, env, "cache", "--help"); code != 0 || !strings.Contains(out, "thindist cache verify [--fix]") {
		t.Errorf("cache --help does not describe verify:\n%s", out)
	}
	if code, _, _ := runCLI(t, env, "cache", "stats", "--fix"); code != 2 {
		t.Errorf("--fix with stats: exit %d, want 2", code)
	}
	// Flags anywhere: before the subcommand too.
	if code, out, errOut := runCLI(t, env, "cache", "--cache-dir", dir, "--fix", "verify"); code != 0 || !strings.Contains(out, ": 0 corrupt") {
		t.Errorf("cache --cache-dir DIR --fix verify: exit %d, %q\n%s", code, errOut, out)
	}
}
