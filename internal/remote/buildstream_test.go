package remote_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/sys/digest"
)

// TestBuildStreamCAS checks the CAS client against a real third-party
// implementation, Debian's BuildStream CAS server (python3-buildstream):
// capabilities, FindMissingBlobs, batched and streamed uploads (its batch
// limit is 1 MiB), and reads. The server binds every interface, so the test
// re-runs itself inside a private network namespace that has only loopback
// (unshare -n), and starts the server there.
func TestBuildStreamCAS(t *testing.T) {
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	// Debian's package is for the system interpreter, not one on PATH
	// (pyenv and the like).
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	if exec.Command(python, "-c", "import buildstream._artifactcache.casserver").Run() != nil {
		skip("python3-buildstream is not installed")
	}
	if os.Getenv("THINDIST_IN_NETNS") == "" {
		if exec.Command("unshare", "-n", "true").Run() != nil {
			skip("cannot create a network namespace (unshare -n)")
		}
		cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" -test.run='^TestBuildStreamCAS$' -test.v`, os.Args[0])
		cmd.Env = append(os.Environ(), "THINDIST_IN_NETNS=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a private network namespace:\n%s", out)
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestBuildStreamCAS")) {
			t.Fatalf("the test failed inside the namespace: %v", err)
		}
		return
	}

	const port = "11001"
	repo := t.TempDir()
	server := exec.Command(python, "-c", `import sys
from buildstream._artifactcache.casserver import server_main
sys.argv = ["bst-artifact-server", "--port", "`+port+`", "--enable-push", sys.argv[1]]
server_main()`, repo)
	server.Stdout, server.Stderr = os.Stderr, os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the BuildStream server did not listen: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := remote.Dial(ctx, remote.Options{Target: "grpc://127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("batch limit %d, compression %s, exec %v", c.BatchLimit(), c.Compression(), c.ExecEnabled())

	blobs := map[digest.Digest][]byte{}
	for _, size := range []int{0, 1, 100, 4000, 300 << 10, 700 << 10, 3 << 20} {
		b := make([]byte, size)
		rand.Read(b)
		blobs[digest.OfBytes(b)] = b
	}
	file := t.TempDir() + "/big"
	big := make([]byte, 5<<20+17)
	rand.Read(big)
	os.WriteFile(file, big, 0o644)
	files := map[digest.Digest]string{digest.OfBytes(big): file}

	if err := c.CAS.Ensure(ctx, nil, blobs, files); err != nil {
		t.Fatalf("upload: %v", err)
	}
	cn := c.Stats()
	t.Logf("uploaded %d blobs, %d bytes; %d batches, %d streams", cn.BlobsUploaded, cn.BytesUploaded,
		cn.BatchUpdateCalls, cn.StreamWrites)
	if cn.StreamWrites < 2 || cn.BatchUpdateCalls < 1 {
		t.Errorf("expected both batched and streamed uploads")
	}
	var all []digest.Digest
	for d := range blobs {
		all = append(all, d)
	}
	for d := range files {
		all = append(all, d)
	}
	missing, err := c.FindMissing(ctx, all)
	if err != nil || len(missing) != 0 {
		t.Fatalf("after upload FindMissingBlobs says %v missing (err %v)", missing, err)
	}
	for d, want := range blobs {
		got, err := c.ReadBytes(ctx, nil, d)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %s: %v", d, err)
		}
	}
	dst := t.TempDir() + "/back"
	for d := range files {
		if err := c.ReadFile(ctx, nil, d, dst); err != nil {
			t.Fatal(err)
		}
		if back, _ := os.ReadFile(dst); !bytes.Equal(back, big) {
			t.Errorf("large blob read back differently")
		}
	}
	// A second Ensure of the same blobs uploads nothing; a fresh client
	// asks and uploads nothing either.
	before := c.Stats().BlobsUploaded
	c.CAS.Ensure(ctx, nil, blobs, files)
	c2, err := remote.Dial(ctx, remote.Options{Target: "grpc://127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.CAS.Ensure(ctx, nil, blobs, files); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().BlobsUploaded - before + c2.Stats().BlobsUploaded; n != 0 {
		t.Errorf("%d blobs uploaded again", n)
	}
	unknown := digest.OfBytes([]byte(fmt.Sprint(time.Now().UnixNano())))
	if _, err := c.ReadBytes(ctx, nil, unknown); err == nil {
		t.Errorf("reading an unknown blob succeeded")
	}
}
