package remote_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestEnsureUploaderCancelled: an action whose upload another action is
// waiting for gives up (its context is cancelled: a race it lost); the
// waiting action uploads the blob itself instead of failing with the
// other's cancellation (which the link reported as "interrupted").
func TestEnsureUploaderCancelled(t *testing.T) {
	var held atomic.Int32
	release := make(chan struct{})
	_, addr := fake(t, reapitest.Options{Hook: func(method string, _ metadata.MD) error {
		if method == reapitest.MethodFindMissingBlobs && held.Add(1) == 1 {
			<-release // the first lookup hangs until the test lets it go
		}
		return nil
	}})
	c := dial(t, addr, remote.Options{})
	blob := randomBlob(100)
	blobs := map[digest.Digest][]byte{digest.OfBytes(blob): blob}

	first, cancelFirst := context.WithCancel(t.Context())
	firstDone := make(chan error, 1)
	go func() { firstDone <- c.CAS.Ensure(first, nil, blobs, nil) }()
	for held.Load() == 0 {
		time.Sleep(time.Millisecond) // polling; the test's timeout is the safety net
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- c.CAS.Ensure(t.Context(), nil, blobs, nil) }()
	time.Sleep(20 * time.Millisecond) // let the second wait for the first (if it does not yet, it waits for nothing)
	cancelFirst()
	if err := <-firstDone; err == nil {
		t.Errorf("the cancelled upload reported success")
	}
	close(release)
	if err := <-secondDone; err != nil {
		t.Fatalf("the waiting action failed with the other's cancellation: %v", err)
	}
	if missing, err := c.FindMissing(t.Context(), []digest.Digest{digest.OfBytes(blob)}); err != nil || len(missing) != 0 {
		t.Errorf("the blob is not in the CAS: %v %v", missing, err)
	}
}
