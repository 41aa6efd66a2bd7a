package remote_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/thindist/thindist/internal/cache"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// TestReadFileReplacesHardLink: the local cache places a hit as a hard link
// to its blob. When the same output path is then written from the remote
// service (the hit was unusable, the action ran remotely), the path is
// replaced: the cached blob keeps its content.
func TestReadFileReplacesHardLink(t *testing.T) {
	disk, err := cache.OpenDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cached, fresh := randomBlob(3000), randomBlob(2000)
	dc := digest.OfBytes(cached)
	if err := disk.WriteBlobBytes(t.Context(), nil, dc, cached); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out.o")
	if err := disk.ReadBlob(t.Context(), nil, dc, dst); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Sys().(*syscall.Stat_t).Nlink < 2 {
		t.Fatalf("the cache did not place its blob as a hard link (%v): the test tests nothing", err)
	}

	_, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{})
	df := digest.OfBytes(fresh)
	if err := c.CAS.Ensure(t.Context(), nil, map[digest.Digest][]byte{df: fresh}, nil); err != nil {
		t.Fatal(err)
	}
	if err := remote.NewStore(c).ReadBlob(t.Context(), nil, df, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, fresh) {
		t.Error("the output does not hold the remote blob")
	}
	if got, err := disk.ReadBlobBytes(t.Context(), nil, dc); err != nil || !bytes.Equal(got, cached) {
		t.Errorf("the cached blob was written through the hard link: %v", err)
	}
}
