package floor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// A bare cold action: the least a remote action costs a client's CPU on
// this machine. The client (the floor's, plain grpc-go, no thindist code)
// makes only the calls a client with a cache key of its own must make for
// an action no cache holds: GetActionResult under its key (a miss),
// FindMissingBlobs and BatchUpdateBlobs of its input, its directory, its
// Command and Action messages, Execute, BatchReadBlobs of its output, and
// UpdateActionResult under its key; it checks the output's digest and
// writes it to a file (a temporary name, then renamed). Nothing is
// batched across actions. The test double runs each action for real,
// sleeping so that the actions end a given time apart: on this VM a call
// made after the process has gone idle costs several times one made while
// it is busy, so the floor of a link whose actions end one by one (lua's
// 33 end over half a second) is far above that of one whose actions end
// together.

// actionFloor is the client's CPU per bare cold action, for actions ending
// Apart from one another.
type actionFloor struct {
	Apart     time.Duration `json:"apart"`
	PerAction time.Duration `json:"per_action"`
	Actions   int           `json:"actions"`
}

const (
	floorActions     = 33 // as lua's link
	floorActionIn    = 20 << 10
	floorActionOut   = 30 << 10
	floorActionRound = 3 // rounds measured after one to warm up; the median is kept
)

// floorSpacings are the time between two actions' ends measured: together,
// 1 ms, and 15 ms (lua's, on average).
var floorSpacings = []time.Duration{0, time.Millisecond, 15 * time.Millisecond}

// measureActions measures n bare cold actions ending apart from one
// another, rounds times after a warm-up round, and returns the median
// CPU per action. The outputs are written under dir.
func measureActions(conn *grpc.ClientConn, dir string, n, rounds int, apart time.Duration) (actionFloor, error) {
	f := actionFloor{Apart: apart, Actions: n}
	rounds = max(1, rounds)
	var per []time.Duration
	for r := 0; r <= rounds; r++ {
		acts, err := bareActions(n, apart)
		if err != nil {
			return f, err
		}
		c0 := processCPU()
		if err := runBareActions(conn, dir, acts); err != nil {
			return f, err
		}
		if r > 0 {
			per = append(per, (processCPU()-c0)/time.Duration(n))
		}
	}
	slices.Sort(per)
	f.PerAction = per[len(per)/2]
	return f, nil
}

// bareAction is one action's messages and blobs, made before the clock
// starts.
type bareAction struct {
	action, key *repb.Digest
	digests     []*repb.Digest    // the blobs it needs in the CAS
	blobs       map[string][]byte // by hash
}

// bareActions makes n actions, action i sleeping (i+1) × apart on the
// worker before it writes floorActionOut bytes of its input, repeated, to
// its output. Every round's actions are new (a random input each), so
// nothing is cached.
func bareActions(n int, apart time.Duration) ([]bareAction, error) {
	acts := make([]bareAction, n)
	for i := range acts {
		in := make([]byte, floorActionIn)
		if _, err := rand.Read(in); err != nil {
			return nil, err
		}
		inD := blobDigest(in)
		dirB, dirD, err := marshalled(&repb.Directory{Files: []*repb.FileNode{{Name: "in", Digest: inD}}})
		if err != nil {
			return nil, err
		}
		script := fmt.Sprintf("sleep %.3f; cat in in | head -c %d > out", (apart * time.Duration(i+1)).Seconds(), floorActionOut)
		cmdB, cmdD, err := marshalled(&repb.Command{Arguments: []string{"/bin/sh", "-c", script}, OutputPaths: []string{"out"}})
		if err != nil {
			return nil, err
		}
		actB, actD, err := marshalled(&repb.Action{CommandDigest: cmdD, InputRootDigest: dirD, DoNotCache: true})
		if err != nil {
			return nil, err
		}
		// The key is an Action of its own, as thindist's is: the
		// ActionCache holds entries for Actions in the CAS.
		keyB, keyD, err := marshalled(&repb.Action{CommandDigest: cmdD, InputRootDigest: dirD, Salt: []byte("floor key")})
		if err != nil {
			return nil, err
		}
		acts[i] = bareAction{action: actD, key: keyD,
			digests: []*repb.Digest{inD, dirD, cmdD, actD, keyD},
			blobs:   map[string][]byte{inD.Hash: in, dirD.Hash: dirB, cmdD.Hash: cmdB, actD.Hash: actB, keyD.Hash: keyB}}
	}
	return acts, nil
}

// runBareActions runs acts at once, each in a goroutine of its own, and
// returns their failures, each naming its action.
func runBareActions(conn *grpc.ClientConn, dir string, acts []bareAction) error {
	var wg sync.WaitGroup
	errs := make([]error, len(acts))
	for i, a := range acts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runBareAction(conn, filepath.Join(dir, strconv.Itoa(i)+".o"), a); err != nil {
				errs[i] = fmt.Errorf("bare action %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func runBareAction(conn *grpc.ClientConn, out string, a bareAction) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ac := repb.NewActionCacheClient(conn)
	cas := repb.NewContentAddressableStorageClient(conn)
	if _, err := ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: a.key}); err == nil {
		return fmt.Errorf("its key is in the ActionCache already")
	}
	missing, err := cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: a.digests})
	if err != nil {
		return err
	}
	up := &repb.BatchUpdateBlobsRequest{}
	for _, d := range missing.GetMissingBlobDigests() {
		up.Requests = append(up.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: d, Data: a.blobs[d.GetHash()]})
	}
	if _, err := cas.BatchUpdateBlobs(ctx, up); err != nil {
		return err
	}
	stream, err := repb.NewExecutionClient(conn).Execute(ctx, &repb.ExecuteRequest{ActionDigest: a.action, SkipCacheLookup: true})
	if err != nil {
		return err
	}
	var resp repb.ExecuteResponse
	for done := false; !done; {
		op, err := stream.Recv()
		if err == io.EOF {
			return fmt.Errorf("the Execute stream ended without a result")
		}
		if err != nil {
			return err
		}
		if done = op.GetDone(); done {
			if err := op.GetResponse().UnmarshalTo(&resp); err != nil {
				return err
			}
		}
	}
	res := resp.GetResult()
	if len(res.GetOutputFiles()) != 1 || res.GetExitCode() != 0 {
		return fmt.Errorf("executed: exit code %d, %d outputs (%v)", res.GetExitCode(), len(res.GetOutputFiles()), resp.GetStatus())
	}
	want := res.GetOutputFiles()[0].GetDigest()
	got, err := cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{want}})
	if err != nil {
		return err
	}
	if len(got.GetResponses()) != 1 {
		return fmt.Errorf("BatchReadBlobs answered %d blobs", len(got.GetResponses()))
	}
	data := got.GetResponses()[0].GetData()
	if d := blobDigest(data); d.GetHash() != want.GetHash() || d.GetSizeBytes() != want.GetSizeBytes() {
		return fmt.Errorf("the output read is not its digest's")
	}
	if err := os.WriteFile(out+".tmp", data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return err
	}
	_, err = ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: a.key, ActionResult: res})
	return err
}

// blobDigest and marshalled are the floor client's own digests rather
// than internal/sys/digest's: the client stands for any grpc-go client, so it
// runs none of thindist's code.
func blobDigest(b []byte) *repb.Digest {
	h := sha256.Sum256(b)
	return &repb.Digest{Hash: hex.EncodeToString(h[:]), SizeBytes: int64(len(b))}
}

func marshalled(m proto.Message) ([]byte, *repb.Digest, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	return b, blobDigest(b), nil
}
