package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/remote/reapi"
)

// failure is what a failed Execute or WaitExecution means for the action
// (classify).
type failure int

const (
	actionFailure          failure = iota // this action failed: no retry
	reexecute                             // the server forgot the operation: execute again
	reupload                              // inputs went missing from the CAS: upload them again, execute again
	unavailableBeforeTaken                // the service was unavailable before it took the action: retry
	transientFailure                      // retry
	runWideFailure                        // no action of the run can succeed (Permanent)
)

// classify says what err, the failure of a call about an operation
// (resuming: a WaitExecution of one the server had taken), means.
func classify(err error, resuming bool) failure {
	switch code := status.Code(err); {
	case code == codes.NotFound && resuming:
		return reexecute
	case code == codes.FailedPrecondition && missingInputs(err):
		return reupload
	case code == codes.Unavailable && !resuming:
		return unavailableBeforeTaken
	case transient(err):
		return transientFailure
	case permanent(code):
		return runWideFailure
	}
	return actionFailure
}

// uploadAgain uploads ex's inputs anew, after the server said some went
// missing from its CAS (evicted), counting them in m.
func (e *Executor) uploadAgain(ctx context.Context, m Meter, ex *reapi.Executable) error {
	for d := range ex.Blobs {
		e.c.CAS.Forget(d)
	}
	for d := range ex.Files {
		e.c.CAS.Forget(d)
	}
	if err := e.c.CAS.Ensure(ctx, m, ex.Blobs, ex.Files); err != nil {
		return fmt.Errorf("uploading inputs again: %w", err)
	}
	return e.shipAgain(ctx, m, ex)
}

// exhausted is the error of an action whose retries ran out after
// attempts, the last failing with lastErr, unavailable of them with the
// service unavailable before it took the action.
func (e *Executor) exhausted(attempts int, lastErr error, unavailable int) error {
	msg := fmt.Sprintf("remote execution failed after %d attempts: %v", attempts, lastErr)
	if status.Code(lastErr) == codes.Unavailable || mentionsPlatform(lastErr) {
		// The service stayed unavailable, or has no worker for the
		// platform, for the whole retry window (Buildbarn answers
		// Unavailable "No workers exist for instance name prefix ...
		// platform ..." during its scheduler's
		// platformQueueWithNoWorkersTimeout after start): the other
		// actions would each wait as long, so none is sent any more.
		p := &Permanent{Err: errors.New(msg)}
		switch {
		case mentionsPlatform(lastErr):
			p.Hint = fmt.Sprintf("the server has no worker for the platform properties [%s] thindist sent: check --remote-platform", e.platformString())
		case unavailable > 0:
			p.Hint = fmt.Sprintf("the service stayed unavailable; a server without a worker matching the platform properties [%s] may answer so, "+
				"as Buildbarn does during its scheduler's platformQueueWithNoWorkersTimeout after start: check --remote-platform", e.platformString())
		}
		e.off.CompareAndSwap(nil, p)
		return e.off.Load() // the same error for every action, reported once
	}
	return errors.New(msg)
}

// Permanent is a failure of remote execution that no retry, and no other
// action of the run, gets over: after one, the executor sends no more
// actions (a run-wide circuit breaker).
type Permanent struct {
	Err  error
	Hint string
}

func (p *Permanent) Error() string {
	if p.Hint == "" {
		return p.Err.Error()
	}
	return p.Err.Error() + "\n  (" + p.Hint + ")"
}

func (p *Permanent) Unwrap() error { return p.Err }

// RunWide marks a Permanent as holding for every action of the run
// (executor.RunWide).
func (p *Permanent) RunWide() {}

// permanent reports whether an Execute failure with code is about the
// server or the run's configuration rather than one action. Only
// FailedPrecondition without missing blobs reaches here.
func permanent(code codes.Code) bool {
	switch code {
	case codes.FailedPrecondition, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// missingInputs reports whether a FailedPrecondition error says that
// blobs are missing from the CAS: the REAPI puts a PreconditionFailure
// with violations of type MISSING in its details. Other
// FailedPreconditions (Buildbarn: "No workers exist for instance name
// prefix ... platform ...") are not about the inputs.
func missingInputs(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				if v.GetType() == "MISSING" {
					return true
				}
			}
		}
	}
	return false
}

func mentionsPlatform(err error) bool {
	m := strings.ToLower(status.Convert(err).Message())
	return strings.Contains(m, "no worker") || strings.Contains(m, "platform")
}

func (e *Executor) platformString() string {
	var s []string
	for _, p := range e.platform.GetProperties() {
		s = append(s, p.Name+"="+p.Value)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
