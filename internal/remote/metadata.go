package remote

import (
	"context"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/sys/version"
)

// requestMetadataHeader is the header in which a REAPI client describes
// every call (RequestMetadata, remote_execution.proto). Servers group
// calls into invocations by its tool_invocation_id: Buildbarn's scheduler
// gives each invocation a queue of its own and serves the queues in turn,
// so without it the links of every developer on the cluster share one
// queue; BuildBuddy and EngFlow list invocations, and the actions of
// each, by it.
const requestMetadataHeader = "build.bazel.remote.execution.v2.requestmetadata-bin"

// ActionMnemonic is what thindist calls its actions in RequestMetadata
// (Bazel's are "CppCompile" and the like).
const ActionMnemonic = "ThinLTOBackend"

// callMetadata returns the header pairs every call of the run carries:
// the configured headers, and the run's RequestMetadata.
func callMetadata(o Options) []string {
	kv := make([]string, 0, 2*len(o.Headers)+2)
	for _, h := range o.Headers {
		kv = append(kv, strings.ToLower(h[0]), h[1])
	}
	return append(kv, requestMetadataHeader, string(requestMetadata(o, "", "")))
}

func requestMetadata(o Options, target, actionID string) []byte {
	b, err := proto.Marshal(&repb.RequestMetadata{
		ToolDetails:             &repb.ToolDetails{ToolName: "thindist", ToolVersion: version.Short()},
		ToolInvocationId:        o.Invocation,
		CorrelatedInvocationsId: o.Build,
		ActionMnemonic:          ActionMnemonic,
		TargetId:                target,
		ActionId:                actionID,
	})
	if err != nil {
		panic(err) // strings only: it cannot fail
	}
	return b
}

// Invocation is the run's tool_invocation_id: what the server's pages
// list this link under.
func (c *Client) Invocation() string { return c.opts.Invocation }

type actionKey struct{}

type actionMetadata struct{ target, actionID string }

// forAction returns ctx whose calls (made through the client) name the
// action they serve: the backend (target_id, e.g. "lib.a(m.o)"; "" keeps
// the one ctx names, if any) and the digest the call is about (action_id),
// as Bazel names the target and action of its calls. Batched calls serve
// several actions and name none.
func forAction(ctx context.Context, target string, d digest.Digest) context.Context {
	if target == "" {
		if am, ok := ctx.Value(actionKey{}).(actionMetadata); ok {
			target = am.target
		}
	}
	return context.WithValue(ctx, actionKey{}, actionMetadata{target, d.HexHash()})
}

// withMD adds the run's headers to ctx, with the action of ctx (forAction)
// named in its RequestMetadata.
func (c *Client) withMD(ctx context.Context) context.Context {
	if am, ok := ctx.Value(actionKey{}).(actionMetadata); ok {
		kv := append([]string(nil), c.md...)
		kv[len(kv)-1] = string(requestMetadata(c.opts, am.target, am.actionID))
		return metadata.AppendToOutgoingContext(ctx, kv...)
	}
	return metadata.AppendToOutgoingContext(ctx, c.md...)
}
