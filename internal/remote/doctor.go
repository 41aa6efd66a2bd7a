package remote

import (
	"context"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/thindist/thindist/internal/digest"
	"github.com/thindist/thindist/internal/reapi"
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
	rootDigest, blobs, err := reapi.NewTree().Build()
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
	if err := e.c.CAS.Ensure(ctx, blobs, nil); err != nil {
		return nil, fmt.Errorf("uploading the action: %w", err)
	}
	resp, err := e.run(ctx, ex)
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

// CheckCAS writes a small blob unique to this call, checks that
// FindMissingBlobs then knows it, and reads it back.
func (c *Client) CheckCAS(ctx context.Context) error {
	data := []byte("thindist doctor " + uuid())
	d := digest.OfBytes(data)
	if err := c.CAS.Ensure(ctx, map[digest.Digest][]byte{d: data}, nil); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	missing, err := c.FindMissing(ctx, []digest.Digest{d})
	if err != nil {
		return fmt.Errorf("FindMissingBlobs: %w", err)
	}
	if len(missing) != 0 {
		return fmt.Errorf("a blob just uploaded is reported missing")
	}
	back, err := c.ReadBytes(ctx, d)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if string(back) != string(data) {
		return fmt.Errorf("read back different content")
	}
	return nil
}
