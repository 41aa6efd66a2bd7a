package cache

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/sys/digest"
)

// storeEntry stores an action record for key whose output 0 is obj.
func storeEntry(t *testing.T, c *Disk, key string, obj []byte) (digest.Digest, digest.Digest) {
	t.Helper()
	ctx := context.Background()
	d := digest.OfBytes(obj)
	if err := c.WriteBlobBytes(ctx, nil, d, obj); err != nil {
		t.Fatal(err)
	}
	k := digest.OfBytes([]byte(key))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: outputName(0), Digest: d.Proto()}}}
	if err := c.UpdateActionResult(ctx, k, ar); err != nil {
		t.Fatal(err)
	}
	return k, d
}

// TestVerify damages a cache in each way it can be damaged and checks that
// Verify names exactly the damaged entries, that fix removes them, and
// that what is left verifies clean and still serves.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	c := openDisk(t)
	goodKey, good := storeEntry(t, c, "good", elfObject("good"))
	flipKey, flipped := storeEntry(t, c, "flipped", elfObject("flipped"))
	truncKey, _ := storeEntry(t, c, "truncated", elfObject("truncated"))
	_, evicted := storeEntry(t, c, "evicted", elfObject("evicted"))
	st, err := c.Verify(ctx, false)
	if err != nil || len(st.Corrupt) != 0 || st.Blobs != 4 || st.Records != 4 {
		t.Fatalf("a sound cache: %v, %d blobs, %d records, corrupt %+v", err, st.Blobs, st.Records, st.Corrupt)
	}

	// A flipped byte in a blob; a truncated record; a record whose object
	// is not an object (its blob is sound); a record of a failure; a record
	// that does not parse; an evicted blob (not corrupt: a miss).
	data, _ := os.ReadFile(c.casPath(flipped))
	data[len(data)-1] ^= 1
	os.Chmod(c.casPath(flipped), 0o644) // blobs are read-only
	os.WriteFile(c.casPath(flipped), data, 0o644)
	rec, _ := os.ReadFile(c.acPath(truncKey))
	os.WriteFile(c.acPath(truncKey), rec[:len(rec)/2], 0o644)
	notObjKey, notObj := storeEntry(t, c, "not an object", []byte("#!/bin/sh\necho not an object\n"))
	failedKey := digest.OfBytes([]byte("failed"))
	if err := c.UpdateActionResult(ctx, failedKey, &repb.ActionResult{ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	garbageKey := digest.OfBytes([]byte("garbage"))
	garbage := []byte{0x0a, 0x50, 0x01} // field 1: 80 bytes announced, 1 there
	sum := sha256.Sum256(garbage)
	os.MkdirAll(filepath.Dir(c.acPath(garbageKey)), 0o755)
	if err := os.WriteFile(c.acPath(garbageKey), append(sum[:], garbage...), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(c.casPath(evicted))

	want := []string{c.casPath(flipped), c.acPath(flipKey), c.acPath(truncKey), c.acPath(notObjKey), c.acPath(failedKey), c.acPath(garbageKey)}
	sort.Strings(want)
	paths := func(cs []Corrupt) []string {
		var ps []string
		for _, c := range cs {
			ps = append(ps, c.Path)
		}
		sort.Strings(ps)
		return ps
	}
	st, err = c.Verify(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(st.Corrupt); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("corrupt:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, cr := range st.Corrupt {
		if cr.Removed || cr.Problem == "" {
			t.Errorf("without fix: %+v", cr)
		}
		if _, err := os.Stat(cr.Path); err != nil {
			t.Errorf("without fix, %s was removed", cr.Path)
		}
	}

	st, err = c.Verify(ctx, true)
	if err != nil || len(st.Corrupt) != len(want) {
		t.Fatalf("with fix: %v, %d corrupt", err, len(st.Corrupt))
	}
	for _, cr := range st.Corrupt {
		if !cr.Removed {
			t.Errorf("not removed: %+v", cr)
		}
	}
	if _, err := os.Stat(c.casPath(notObj)); err == nil {
		t.Error("the non-object blob of a record was kept")
	}
	if st, err := c.Verify(ctx, false); err != nil || len(st.Corrupt) != 0 {
		t.Errorf("after fix: %v %+v", err, st.Corrupt)
	}
	// The sound entry still serves.
	if _, err := c.GetActionResult(ctx, nil, goodKey, nil); err != nil {
		t.Errorf("the sound record: %v", err)
	}
	if _, err := c.ReadBlobBytes(ctx, nil, good); err != nil {
		t.Errorf("the sound blob: %v", err)
	}
}
