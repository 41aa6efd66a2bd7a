package executor

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// os/exec copies a compiler's output through capped.ReadFrom: everything up
// to the limit is kept, the rest drained and dropped.
func TestCappedReadFrom(t *testing.T) {
	var c capped
	big := strings.Repeat("x", captureLimit+12345)
	n, err := io.Copy(&c, strings.NewReader("warning: a\n"+big))
	if err != nil || n != int64(len(big))+11 {
		t.Fatalf("copied %d, %v", n, err)
	}
	if len(c.b) != captureLimit || !bytes.HasPrefix(c.b, []byte("warning: a\nxxx")) {
		t.Fatalf("kept %d bytes starting %q", len(c.b), c.b[:20])
	}

	var out, errb capped
	cmd := exec.Command("sh", "-c", "echo to-stdout; echo to-stderr >&2")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if string(out.b) != "to-stdout\n" || string(errb.b) != "to-stderr\n" {
		t.Fatalf("stdout %q stderr %q", out.b, errb.b)
	}
}
