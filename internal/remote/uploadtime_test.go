package remote

import (
	"testing"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
)

// TestUploadTime: an action's upload time is the bytes of its prepared
// input files not yet known to be in the CAS over the upload throughput
// known; nothing without a throughput, or for an action not prepared.
func TestUploadTime(t *testing.T) {
	c := &Client{link: newLink(true, 0, time.Now)}
	c.CAS = newUploader(c)
	e := &Executor{c: c}
	big, sent := digest.OfBytes(make([]byte, 30<<20)), digest.OfBytes([]byte("in the CAS"))
	a := &action.Action{ID: "m.o"}
	e.prepared.Store(a, &preparation{ex: &reapi.Executable{Files: map[digest.Digest]string{big: "big.bc", sent: "sent.bc"}}})
	c.CAS.MarkPresent(sent)
	if got := e.UploadTime(a); got != 0 {
		t.Errorf("upload time %v with no throughput known, want 0", got)
	}
	c.Recall(Measured{Up: Rate{BytesPerSec: 10 << 20, Bytes: 100 << 20}})
	if got := e.UploadTime(a); got != 3*time.Second {
		t.Errorf("upload time %v, want 3s (30 MiB at 10 MiB/s)", got)
	}
	if got := e.UploadTime(&action.Action{ID: "other.o"}); got != 0 {
		t.Errorf("upload time %v for an action not prepared, want 0", got)
	}
}
