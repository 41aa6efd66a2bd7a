package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
)

// CommandResult is what a command run by RunCommand did.
type CommandResult struct {
	ExitCode       int
	Stdout, Stderr []byte
	Cached         bool
}

// RunCommand runs argv on a worker with an empty input root and no
// caching (for `thindist doctor`).
func (e *Executor) RunCommand(ctx context.Context, argv []string) (*CommandResult, error) {
	return e.runIn(ctx, reapi.NewTree(), argv)
}

// runIn runs argv on a worker with the input root tree, uncached.
func (e *Executor) runIn(ctx context.Context, tree *reapi.Tree, argv []string) (*CommandResult, error) {
	rootDigest, blobs, err := tree.Build()
	if err != nil {
		return nil, err
	}
	cmd := &repb.Command{Arguments: argv, EnvironmentVariables: e.env, Platform: e.platform}
	cd, cb, err := digest.OfMessage(cmd)
	if err != nil {
		return nil, err
	}
	blobs[cd] = cb
	act := &repb.Action{CommandDigest: cd.Proto(), InputRootDigest: rootDigest.Proto(), Platform: e.platform, DoNotCache: true}
	ad, ab, err := digest.OfMessage(act)
	if err != nil {
		return nil, err
	}
	blobs[ad] = ab
	ex := &reapi.Executable{Action: act, ActionDigest: ad, Command: cmd, Blobs: blobs}
	if err := e.c.CAS.Ensure(ctx, nil, blobs, nil); err != nil {
		return nil, fmt.Errorf("uploading the action: %w", err)
	}
	resp, _, err := e.run(ctx, nil, ex, executor.Stages(nil))
	if err != nil {
		return nil, err
	}
	ar := resp.GetResult()
	res := &CommandResult{ExitCode: int(ar.GetExitCode()), Cached: resp.CachedResult}
	if res.Stdout, err = e.stdio(ctx, ar.GetStdoutRaw(), ar.GetStdoutDigest()); err != nil {
		return nil, fmt.Errorf("reading stdout: %w", err)
	}
	if res.Stderr, err = e.stdio(ctx, ar.GetStderrRaw(), ar.GetStderrDigest()); err != nil {
		return nil, fmt.Errorf("reading stderr: %w", err)
	}
	return res, nil
}

// CheckCASBigBlob is the size of the large blob CheckCAS round-trips: as
// large as a big backend object, and above the 2 MiB message limit of a
// stock Buildbarn, which does not advertise it.
const CheckCASBigBlob = 3 << 20

// CheckCAS writes a small blob and a ~3 MiB one, both unique to this
// call, checks that FindMissingBlobs then knows them, and reads them back
// together the way a remote action's outputs and stderr travel.
func (c *Client) CheckCAS(ctx context.Context) error {
	small := []byte("thindist doctor " + uuid())
	big := make([]byte, CheckCASBigBlob)
	rand.Read(big[:4096]) // unique, and not all zeros
	copy(big[len(big)-len(small):], small)
	ds, dbig := digest.OfBytes(small), digest.OfBytes(big)
	blobs := map[digest.Digest][]byte{ds: small, dbig: big}
	if err := c.CAS.Ensure(ctx, nil, blobs, nil); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	missing, err := c.FindMissing(ctx, []digest.Digest{ds, dbig})
	if err != nil {
		return fmt.Errorf("FindMissingBlobs: %w", err)
	}
	if len(missing) != 0 {
		return fmt.Errorf("%d blobs just uploaded are reported missing", len(missing))
	}
	back, err := c.ReadBlobs(ctx, nil, []digest.Digest{dbig, ds})
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	for d, want := range blobs {
		if !bytes.Equal(back[d], want) {
			return fmt.Errorf("read back different content for the %d-byte blob", d.Size)
		}
	}
	return nil
}
