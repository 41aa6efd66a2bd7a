package remote_test

import (
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/thindist/thindist/internal/executor"
	"github.com/thindist/thindist/internal/remote"
	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/sys/digest"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// Every call names thindist, the run and its build (--remote-build-id) in
// its RequestMetadata, as servers expect of a REAPI client (Buildbarn
// queues each invocation on its own, BuildBuddy and EngFlow list them);
// Execute names the backend and the action it runs; the configured
// headers go along.
func TestRequestMetadata(t *testing.T) {
	srv, addr := fake(t, reapitest.Options{})
	c := dial(t, addr, remote.Options{Headers: [][2]string{{"X-Api-Key", "k"}}, Build: "ci-job-7"})
	if c.Invocation() == "" {
		t.Fatal("no invocation id")
	}
	ex := remote.NewExecutor(c, remote.ExecOptions{})
	as, outs := shellActions(t, 2, -1)
	for i, a := range as {
		if res, err := ex.Execute(t.Context(), executor.Job{Action: a, Out: outs[i]}); err != nil || res.Failed() {
			t.Fatalf("%v %+v", err, res)
		}
	}
	executed := map[string]string{} // target_id -> action_id
	looked := map[string]string{}   // the same, of the executor's lookups
	methods := map[string]bool{}
	for _, call := range srv.Calls() {
		if got := call.Metadata.Get("x-api-key"); len(got) != 1 || got[0] != "k" {
			t.Errorf("%s: x-api-key %q", call.Method, got)
		}
		raw := call.Metadata.Get("build.bazel.remote.execution.v2.requestmetadata-bin")
		if len(raw) != 1 {
			t.Errorf("%s: %d RequestMetadata headers, want 1", call.Method, len(raw))
			continue
		}
		var rm repb.RequestMetadata
		if err := proto.Unmarshal([]byte(raw[0]), &rm); err != nil {
			t.Fatalf("%s: RequestMetadata: %v", call.Method, err)
		}
		methods[call.Method] = true
		if rm.GetToolDetails().GetToolName() != "thindist" || rm.GetToolDetails().GetToolVersion() == "" ||
			rm.GetToolInvocationId() != c.Invocation() || rm.GetCorrelatedInvocationsId() != "ci-job-7" ||
			rm.GetActionMnemonic() != remote.ActionMnemonic {
			t.Errorf("%s: RequestMetadata %v, want thindist's, invocation %s", call.Method, &rm, c.Invocation())
		}
		switch {
		case strings.HasSuffix(call.Method, "/Execute"):
			executed[rm.GetTargetId()] = rm.GetActionId()
		case strings.HasSuffix(call.Method, "/GetActionResult"):
			looked[rm.GetTargetId()] = rm.GetActionId()
		}
	}
	for _, a := range as {
		want, err := reapi.BuildExecutable(a, reapi.ExecOptions{Files: digest.NewFiles()})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := executed[a.ID]; !ok || got != want.ActionDigest.HexHash() {
			t.Errorf("Execute of %s named action %q, want %s (all: %v)", a.ID, got, want.ActionDigest.HexHash(), executed)
		}
		if got, ok := looked[a.ID]; !ok || got != want.ActionDigest.HexHash() {
			t.Errorf("the lookup of %s named action %q, want %s (all: %v)", a.ID, got, want.ActionDigest.HexHash(), looked)
		}
	}
	for _, m := range []string{"GetCapabilities", "GetActionResult", "FindMissingBlobs", "Execute"} {
		found := false
		for got := range methods {
			found = found || strings.HasSuffix(got, "/"+m)
		}
		if !found {
			t.Errorf("no %s call seen with RequestMetadata (saw %v)", m, methods)
		}
	}
}
