package remote

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClassify: what a failed Execute or WaitExecution means for the
// action, by its code, whether the server had taken the operation, and,
// for FailedPrecondition, whether inputs went missing.
func TestClassify(t *testing.T) {
	missing, err := status.New(codes.FailedPrecondition, "missing").WithDetails(&errdetails.PreconditionFailure{
		Violations: []*errdetails.PreconditionFailure_Violation{{Type: "MISSING", Subject: "blobs/x/1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		err      error
		resuming bool
		want     failure
	}{
		{"operation forgotten", status.Error(codes.NotFound, "no such operation"), true, reexecute},
		{"not found before taken", status.Error(codes.NotFound, "x"), false, actionFailure},
		{"inputs evicted", missing.Err(), false, reupload},
		{"unavailable before taken", status.Error(codes.Unavailable, "x"), false, unavailableBeforeTaken},
		{"unavailable while resuming", status.Error(codes.Unavailable, "x"), true, transientFailure},
		{"exhausted", status.Error(codes.ResourceExhausted, "x"), false, transientFailure},
		{"no worker for the platform", status.Error(codes.FailedPrecondition, "no worker"), false, runWideFailure},
		{"not allowed", status.Error(codes.PermissionDenied, "x"), true, runWideFailure},
		{"no execution service", status.Error(codes.Unimplemented, "x"), false, runWideFailure},
		{"bad action", status.Error(codes.InvalidArgument, "x"), false, actionFailure},
		{"not a status", errors.New("x"), false, actionFailure},
	} {
		if got := classify(c.err, c.resuming); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
