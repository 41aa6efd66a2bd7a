package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSealed: a sealed file reads back whole; one of another format, cut
// short or with a byte changed reads as nothing.
func TestSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memo")
	if err := WriteSealed(path, []byte("memo 1\npayload")); err != nil {
		t.Fatal(err)
	}
	if b, ok := ReadSealed(path, "memo 1\n"); !ok || string(b) != "payload" {
		t.Fatalf("read back %q, %v", b, ok)
	}
	if _, ok := ReadSealed(path, "memo 2\n"); ok {
		t.Error("a file of another format was read")
	}
	data, _ := os.ReadFile(path)
	for name, bad := range map[string][]byte{"cut short": data[:len(data)-1], "changed": append([]byte("memo 1\nPayload"), data[len(data)-32:]...)} {
		os.WriteFile(path, bad, 0o644)
		if _, ok := ReadSealed(path, "memo 1\n"); ok {
			t.Errorf("a file %s was read", name)
		}
	}
}
