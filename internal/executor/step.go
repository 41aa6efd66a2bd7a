package executor

import (
	"fmt"
	"time"
)

// StepKind is what an executor did in one stretch of an action's run
// (Result.Steps). Its String is the name traces print.
type StepKind uint8

const (
	// StepUploadingInputs: sending the action's inputs to the remote
	// service, until the execution was requested.
	StepUploadingInputs StepKind = iota + 1
	// StepRemoteExecution: from the request to the remote result, when
	// the server did not say when a worker took the action (otherwise
	// StepQueued then StepExecuting).
	StepRemoteExecution
	// StepQueued: waiting in the server's queue for a worker.
	StepQueued
	// StepExecuting: a remote worker running the action, as the server
	// reported it (the worker's time, not this machine's).
	StepExecuting
	// StepDownloadingOutputs: reading the remote result's outputs.
	StepDownloadingOutputs
)

var stepNames = [...]string{
	StepUploadingInputs:    "uploading inputs",
	StepRemoteExecution:    "remote execution",
	StepQueued:             "queued",
	StepExecuting:          "executing",
	StepDownloadingOutputs: "downloading outputs",
}

func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", k)
}

// Step is one stretch of an action's run.
type Step struct {
	Kind       StepKind
	Start, End time.Time
}

// Took is how long the step lasted.
func (s Step) Took() time.Duration { return s.End.Sub(s.Start) }
